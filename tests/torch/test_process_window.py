"""The callbacks' job is the whole process (issue 26): a real HF Trainer job and a real
Lightning job, each run as a script of its own, report a total within 1 s of the wall time
from spawning the script to its exit, and their imports and model building are in the
job. The submit time a scheduler left in $MLGOODPUT_JOB_SUBMIT_TIME is recorded too."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from mlgoodput.accounting import BadputType, GoodputCalculator

B = BadputType

#: Common to both scripts: the clock at its first line (before any import), then the imports,
#: a second of "model building" before the callback exists, the training, and the exit.
HEAD = """
import time
first_line = time.time()
import json, sys
import torch
from torch import nn
from torch.utils.data import Dataset
"""

HF = (
    HEAD
    + """
from transformers import Trainer, TrainingArguments
from mlgoodput.torch.hf import GoodputCallback

class Data(Dataset):
    def __len__(self):
        return 6
    def __getitem__(self, i):
        time.sleep(0.02)
        return {"x": torch.ones(8) * i, "labels": torch.ones(1)}

class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 1)
    def forward(self, x, labels):
        time.sleep(0.05)
        out = self.net(x)
        return {"loss": nn.functional.mse_loss(out, labels), "logits": out}

store, out = sys.argv[1], sys.argv[2]
model = Tiny()
time.sleep(1.0)  # building the model
imported = time.time()
cb = GoodputCallback(job_name="hf-window", store=store)
args = TrainingArguments(output_dir=out, max_steps=6, per_device_train_batch_size=1, logging_steps=1000,
                         save_strategy="no", report_to=[], use_cpu=True, dataloader_num_workers=0,
                         disable_tqdm=True)
Trainer(model=model, args=args, train_dataset=Data(), callbacks=[cb]).train()
print(json.dumps({"first_line": first_line, "callback": imported}), flush=True)
"""
)

LIGHTNING = (
    HEAD
    + """
import lightning.pytorch as pl
from torch.utils.data import DataLoader
from mlgoodput.torch.lightning import GoodputCallback

class Data(Dataset):
    def __len__(self):
        return 6
    def __getitem__(self, i):
        time.sleep(0.02)
        return torch.ones(8) * i, torch.ones(1)

class Tiny(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(8, 1)
    def training_step(self, batch, batch_idx):
        time.sleep(0.05)
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)
    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)

store, out = sys.argv[1], sys.argv[2]
model = Tiny()
time.sleep(1.0)  # building the model
imported = time.time()
cb = GoodputCallback(job_name="lit-window", store=store)
trainer = pl.Trainer(max_epochs=1, accelerator="cpu", devices=1, logger=False, enable_progress_bar=False,
                     enable_model_summary=False, enable_checkpointing=False, num_sanity_val_steps=0,
                     default_root_dir=out, callbacks=[cb])
trainer.fit(model, DataLoader(Data(), batch_size=1))
print(json.dumps({"first_line": first_line, "callback": imported}), flush=True)
"""
)


def run_job(script: str, tmp_path: Path, submit: float | None) -> tuple[str, float, float, dict[str, float]]:
    """Run `script` as a process of its own: (store, spawn time, exit time, what it printed)."""
    store = f"sqlite://{tmp_path}/g.db"
    path = tmp_path / "job.py"
    path.write_text(textwrap.dedent(script))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), OMP_NUM_THREADS="1")
    if submit is not None:
        env["MLGOODPUT_JOB_SUBMIT_TIME"] = repr(submit)
    spawned = time.time()
    p = subprocess.run(
        [sys.executable, str(path), store, str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    exited = time.time()
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    said = json.loads(p.stdout.strip().splitlines()[-1])
    return store, spawned, exited, said


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["hf", "lightning"])
def test_the_job_is_the_whole_process_and_takes_the_submit_time(framework: str, tmp_path: Path) -> None:
    submit = time.time() - 30.0  # queued 30 s before the process started
    script, job = (HF, "hf-window") if framework == "hf" else (LIGHTNING, "lit-window")
    store, spawned, exited, said = run_job(script, tmp_path, submit)
    r = GoodputCalculator(job, "goodput", store=store).report()
    wall = exited - spawned
    assert abs(r.total_s - wall) <= 1.0, (r.total_s, wall)
    # the job starts with the process: before the script's first line, not before the spawn
    assert spawned - 0.05 <= r.start <= said["first_line"], (spawned, r.start, said)
    assert r.last_step == 5 and r.disruptions == 0
    # the imports and the model building (more than the second of sleep) are badput: OTHER
    # until the callback exists, training preparation from there to the first step
    before_callback = said["callback"] - r.start
    assert before_callback > 1.0
    unaccounted = r.badput_total_s(B.OTHER)
    assert unaccounted >= before_callback - 0.05, (unaccounted, before_callback)
    assert r.badput_total_s(B.TRAINING_PREP) > 0
    # the submit time from the environment: scheduling goodput knows the 30 s queue
    prod = r.productivity
    assert prod is not None and prod.submit_time == pytest.approx(submit)
    assert prod.submit_source == "env"
    assert prod.queue_s == pytest.approx(r.start - submit, abs=1e-3)


def test_the_process_start_is_read_to_the_tick(tmp_path: Path) -> None:
    """/proc (or psutil) gives the start of a fresh interpreter: after its spawn, before its
    first line; the second job of the process starts when it says it does."""
    code = textwrap.dedent("""
        import time
        first_line = time.time()
        from mlgoodput._process_window import claim_process_start, process_start_time
        t, source = process_start_time()
        print(t, source, first_line, claim_process_start(), claim_process_start())
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    spawned = time.time()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    t, source, first_line, claimed, again = out.split()
    assert source == ("proc" if sys.platform.startswith("linux") else source)
    assert spawned - 0.05 <= float(t) <= float(first_line)
    assert float(claimed) == pytest.approx(float(t), abs=0.02) and again == "None"


@pytest.mark.parametrize("keep", [False, True], ids=["frozen", "kept"])
def test_the_collector_is_frozen_at_exit_once_a_job_ended(keep: bool) -> None:
    """After a job's end the exit skips the collector's passes (gc.freeze, the last thing the
    exit does before the interpreter's teardown); $MLGOODPUT_EXIT_GC=1 keeps them."""
    code = textwrap.dedent("""
        import atexit, gc
        atexit.register(lambda: print("frozen", gc.get_freeze_count() > 0, flush=True))  # runs after the hook
        from mlgoodput._process_window import freeze_collector_at_exit
        freeze_collector_at_exit()
        freeze_collector_at_exit()  # once per process
        print("registered", flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    if keep:
        env["MLGOODPUT_EXIT_GC"] = "1"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True).stdout
    assert out.split() == ["registered", "frozen", str(not keep)]


def test_an_interactive_session_starts_its_job_at_the_callback() -> None:
    """A REPL or a notebook's kernel began long before its job: no process start for it."""
    code = "from mlgoodput._process_window import claim_process_start; print('claim', claim_process_start())"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run(
        [sys.executable, "-i", "-c", code], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env
    ).stdout
    assert "claim None" in out


def test_a_plain_loop_job_starts_when_told_and_takes_the_submit_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import mlgoodput.torch as mt

    store = f"sqlite://{tmp_path}/g.db"
    began = time.time() - 20.0  # as if the process had started 20 s ago
    monkeypatch.setenv("MLGOODPUT_JOB_SUBMIT_TIME", repr(began - 5.0))
    gp = mt.TorchRecorder(job_name="loop-window", store=store, measure_flops=False)
    with gp.job(since=began):
        for _ in gp.steps(range(3)):
            pass
    gp.close()
    r = GoodputCalculator("loop-window", "goodput", store=store).report()
    assert r.start == pytest.approx(began, abs=1e-6) and r.total_s >= 20.0
    assert r.productivity is not None and r.productivity.submit_time == pytest.approx(began - 5.0)
    assert r.productivity.queue_s == pytest.approx(5.0, abs=1e-3)

    monkeypatch.delenv("MLGOODPUT_JOB_SUBMIT_TIME")
    gp = mt.TorchRecorder(job_name="loop-now", store=store, measure_flops=False)
    t = time.time()
    with caplog.at_level("WARNING", logger="mlgoodput.torch"), gp.job(since="yesterday"):
        pass
    gp.close()
    assert any("since='yesterday'" in m for m in caplog.messages)  # said, never raised: started now
    r = GoodputCalculator("loop-now", "goodput", store=store).report()
    assert r.start >= t and r.productivity is not None and r.productivity.submit_time is None
