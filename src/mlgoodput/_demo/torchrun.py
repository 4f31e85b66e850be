"""`mlgoodput demo --framework torch`: two CPU ranks under a real torchrun, one killed midway.

torchrun (gloo on 127.0.0.1) runs `mlgoodput.torch._workload` with two ranks; rank 1
SIGKILLs itself at `kill_at_step`, torchrun restarts both, they restore the newest
torch.distributed.checkpoint and finish. Every rank records its loss into the job's ML run
and logs into the job's console session. The job is `demo-torch` in the demos' one store
(see `supervisor.py`); the report, with the straggler lines, is the caller's.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import IO

from mlgoodput._demo.supervisor import DemoResult, console_session, prepare
from mlgoodput._recovery import recover_journals
from mlgoodput._spawn import start_python

TORCH_JOB = "demo-torch"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_torch_demo(
    output_dir: Path,
    store: str | None,
    job: str,
    steps: int = 40,
    kill_at_step: int | None = None,
    out: IO[str] | None = None,
) -> DemoResult:
    """Run the demo under torchrun; `error` in the result says how torchrun failed."""
    out = out or sys.stdout
    if steps < 4:
        raise ValueError(f"--steps must be at least 4 for the torch demo, got {steps!r}")
    kill = steps // 2 + 1 if kill_at_step is None else kill_at_step
    if not 0 < kill < steps:
        raise ValueError(f"--kill-at-step must be between 1 and {steps - 1}, got {kill!r}")
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise ImportError("the torch demo needs PyTorch: pip install 'mlgoodput[torch]'") from e
    url, workdir = prepare(output_dir, store, job, out)
    ckpt = workdir / "checkpoints"
    shutil.rmtree(ckpt, ignore_errors=True)  # a fresh start, also in a store of your own
    ckpt.mkdir(parents=True)
    cmd = [
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        "--nproc-per-node=2",
        "--max-restarts=1",
        "--monitor-interval=0.1",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{_free_port()}",
        "-m",
        "mlgoodput.torch._workload",
        "--store",
        url,
        "--job",
        job,
        "--ckpt-dir",
        str(ckpt),
        "--steps",
        str(steps),
        "--ckpt-every",
        str(max(2, steps // 5)),
        "--kill-at-step",
        str(kill),
        "--kill-rank",
        "1",
        "--step-s",
        "0.1",
        "--track",
    ]
    print(
        f"$ torchrun --nproc-per-node 2 --max-restarts 1 -m mlgoodput.torch._workload ... "
        f"(rank 1 is killed at step {kill})",
        file=out,
        flush=True,
    )
    with console_session(job, url, out):
        proc = start_python(
            cmd,
            extra_env={"OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            phase = msg.get("phase")
            if phase in ("job_start", "restore", "checkpoint", "done") or (
                phase == "step" and (msg.get("step", 0) % 5 == 0 or msg.get("step") == kill)
            ):
                what = (
                    f"step {msg['step']}"
                    if phase == "step"
                    else f"{phase} (step {msg['step']})"
                    if "step" in msg
                    else phase
                )
                att = msg.get("attempt")  # torchrun's restart count, from 0: attempts count from 1 here
                print(f"  attempt {att + 1 if isinstance(att, int) else att}: {what}", file=out, flush=True)
        rc = proc.wait()
    recover_journals(url)  # what the console or a killed rank journaled while the store was busy
    return DemoResult(job, url, None if rc == 0 else f"torchrun exited with {rc}")
