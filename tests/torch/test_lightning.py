"""The Lightning callback on a real (tiny) LightningModule and Trainer: the report has exactly
the buckets that the job's known timeline predicts (sleeps give each phase a known length)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

from mlgoodput.accounting import BadputType, GoodputCalculator
from mlgoodput.torch.lightning import GoodputCallback

B = BadputType
STEP_S, VAL_S, DATA_S = 0.05, 0.1, 0.03
TRAIN_BATCHES, VAL_BATCHES = 6, 2


class Slow(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    def __init__(self, n: int, delay_s: float) -> None:
        self.n, self.delay_s = n, delay_s
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        time.sleep(self.delay_s)
        return self.x[i], self.y[i]


class Tiny(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        time.sleep(STEP_S)
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        time.sleep(VAL_S)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


def _fit(
    tmp_path: Path, store: str, epochs: int, ckpt_path: str | None = None, job: str = "lit", accumulate: int = 1
) -> GoodputCallback:
    cb = GoodputCallback(job_name=job, store=store, peak_flops_per_s=1e10)
    trainer = pl.Trainer(
        accumulate_grad_batches=accumulate,
        max_epochs=epochs,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=VAL_BATCHES,
        default_root_dir=tmp_path,
        callbacks=[cb, pl.callbacks.ModelCheckpoint(dirpath=tmp_path / "ck", save_last=True)],
    )
    trainer.fit(
        Tiny(),
        DataLoader(Slow(TRAIN_BATCHES, DATA_S), batch_size=1),
        DataLoader(Slow(VAL_BATCHES, 0.0), batch_size=1),
        ckpt_path=ckpt_path,
    )
    return cb


@pytest.mark.slow
def test_lightning_callback_buckets(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path}/g.db"
    _fit(tmp_path, store, epochs=2)
    r = GoodputCalculator("lit", "goodput", store=store).report()
    steps = 2 * TRAIN_BATCHES
    assert r.disruptions == 0 and r.last_step == steps - 1
    # evaluation: the sanity check and one validation per epoch, each VAL_BATCHES sleeps
    evals = r.badput_s[B.CUSTOM_BADPUT_EVENTS]
    assert set(evals) == {"EVAL"}
    assert 3 * VAL_BATCHES * VAL_S <= evals["EVAL"] <= 3 * VAL_BATCHES * VAL_S + 1.5
    # a batch's wait blocks training (the loader is synchronous): each step's DATA_S at least
    assert steps * DATA_S * 0.9 <= r.badput_total_s(B.DATA_LOADING_SYNC) <= steps * DATA_S + 1.5
    assert r.badput_total_s(B.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME) > 0  # two epochs, two saves
    assert r.badput_total_s(B.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME) == 0
    assert r.badput_total_s(B.TRAINING_PREP) > 0
    assert r.ideal_step_time_s == pytest.approx(STEP_S, abs=0.04)
    # the steps themselves are productive: all but the first's startup
    assert (steps - 1) * STEP_S * 0.9 <= r.productive_s <= steps * (STEP_S + 0.04)
    for b in (B.WASTED_PROGRESS_FROM_DISRUPTION, B.INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION, B.STALL):
        assert r.badput_total_s(b) == 0, b
    parts = r.productive_s + sum(r.badput_total_s(b) for b in B if b is not B.DATA_LOADING_ASYNC)
    assert parts == pytest.approx(r.total_s, abs=1e-6)
    assert r.to_dict()["mfu"] is not None  # FLOPs of the first step and the configured peak

    # resuming from the last checkpoint is a second attempt that restores epoch 2's step
    cb = _fit(tmp_path, store, epochs=3, ckpt_path=str(tmp_path / "ck" / "last.ckpt"))
    assert cb.recorder is not None
    r2 = GoodputCalculator("lit", "goodput", store=store).report()
    assert r2.disruptions == 1 and r2.last_step == 3 * TRAIN_BATCHES - 1
    assert r2.badput_total_s(B.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME) > 0
    assert r2.badput_total_s(B.WASTED_PROGRESS_FROM_DISRUPTION) == 0  # nothing redone


@pytest.mark.slow
def test_lightning_steps_are_optimizer_steps_with_gradient_accumulation(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path}/g.db"
    _fit(tmp_path, store, epochs=1, job="acc", accumulate=2)
    r = GoodputCalculator("acc", "goodput", store=store).report()
    assert r.last_step == TRAIN_BATCHES // 2 - 1 and r.disruptions == 0
    # each step holds two batches and the wait between them (overlapped, inside the step)
    assert r.ideal_step_time_s == pytest.approx(2 * STEP_S + DATA_S, abs=0.05)
    assert set(r.badput_s[B.CUSTOM_BADPUT_EVENTS]) == {"EVAL"}
