"""The Hugging Face Trainer callback on a real (tiny) model and Trainer: the report has exactly
the buckets that the job's known timeline predicts (sleeps give each phase a known length)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import Dataset
from transformers import Trainer, TrainingArguments

from mlgoodput.accounting import BadputType, GoodputCalculator
from mlgoodput.torch.hf import GoodputCallback

B = BadputType
STEP_S, VAL_S, DATA_S = 0.05, 0.1, 0.03
STEPS, EVERY, VAL_BATCHES = 8, 4, 2


class Slow(Dataset[dict[str, torch.Tensor]]):
    def __init__(self, n: int, delay_s: float) -> None:
        self.n, self.delay_s = n, delay_s
        g = torch.Generator().manual_seed(0)
        self.x, self.y = torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        time.sleep(self.delay_s)
        return {"x": self.x[i], "labels": self.y[i]}


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> dict[str, Any]:
        time.sleep(STEP_S if self.training else VAL_S)
        out = self.net(x)
        return {"loss": nn.functional.mse_loss(out, labels), "logits": out}


@pytest.mark.slow
def test_hf_trainer_callback_buckets(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path}/g.db"
    cb = GoodputCallback(job_name="hf", store=store, peak_flops_per_s=1e10)
    args = TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=STEPS,
        per_device_train_batch_size=1,
        per_device_eval_batch_size=1,
        eval_strategy="steps",
        eval_steps=EVERY,
        save_strategy="steps",
        save_steps=EVERY,
        logging_steps=1000,
        report_to=[],
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
        learning_rate=0.01,
    )
    trainer = Trainer(
        model=Tiny(), args=args, train_dataset=Slow(STEPS, DATA_S), eval_dataset=Slow(VAL_BATCHES, 0.0), callbacks=[cb]
    )
    trainer.train()
    assert cb.recorder is not None and cb.recorder.process_index == 0

    r = GoodputCalculator("hf", "goodput", store=store).report()
    assert r.disruptions == 0 and r.last_step == STEPS - 1
    evals = r.badput_s[B.CUSTOM_BADPUT_EVENTS]
    assert set(evals) == {"EVAL"}
    n_evals = STEPS // EVERY
    assert n_evals * VAL_BATCHES * VAL_S <= evals["EVAL"] <= n_evals * VAL_BATCHES * VAL_S + 1.0
    assert STEPS * DATA_S * 0.9 <= r.badput_total_s(B.DATA_LOADING_SYNC) <= STEPS * DATA_S + 1.0
    assert r.badput_total_s(B.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME) > 0  # two saves
    assert r.badput_total_s(B.TRAINING_PREP) > 0
    assert r.ideal_step_time_s == pytest.approx(STEP_S, abs=0.04)
    assert (STEPS - 1) * STEP_S * 0.9 <= r.productive_s <= STEPS * (STEP_S + 0.04)
    for b in (
        B.WASTED_PROGRESS_FROM_DISRUPTION,
        B.INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION,
        B.STALL,
        B.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME,
    ):
        assert r.badput_total_s(b) == 0, b
    parts = r.productive_s + sum(r.badput_total_s(b) for b in B if b is not B.DATA_LOADING_ASYNC)
    assert parts == pytest.approx(r.total_s, abs=1e-6)
    assert r.to_dict()["mfu"] is not None
