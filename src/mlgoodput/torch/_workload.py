"""A small data-parallel training job for torchrun (gloo, CPU): the torch demo and its tests.

Every rank records with `TorchRecorder`; rank 0 leads. Checkpoints go through
`mlgoodput.torch.checkpoint` (torch.distributed.checkpoint) every `--ckpt-every` steps; a
restarted attempt restores the newest one. With `--kill-at-step N`, rank `--kill-rank`
SIGKILLs itself when it reaches step N in the first attempt, and torchrun restarts the
worker group. Rank 0 prints one JSON line per phase on stdout (and appends them to
`--truth` when given): what the job really did, to check the report against.

    torchrun --nproc-per-node 2 --max-restarts 1 -m mlgoodput.torch._workload --store URL ...
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="mlgoodput.torch._workload")
    p.add_argument("--store", required=True)
    p.add_argument("--job", required=True)
    p.add_argument("--ckpt-dir", type=Path, required=True)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--ckpt-every", type=int, default=5)
    p.add_argument("--kill-at-step", type=int, default=None)
    p.add_argument("--kill-rank", type=int, default=1)
    p.add_argument("--step-s", type=float, default=0.1, help="extra seconds of work per step")
    p.add_argument("--slow-rank", type=int, default=None, help="this rank loads each batch late")
    p.add_argument("--slow-s", type=float, default=0.0)
    p.add_argument("--slow-share", type=float, default=1.0, help="share of its batches loaded late (drawn at random)")
    p.add_argument("--slow-seed", type=int, default=0, help="seed of that draw (and of --jitter-s)")
    p.add_argument(
        "--jitter-s",
        type=float,
        default=0.0,
        help="every rank: each batch takes this much longer on average (exponential)",
    )
    p.add_argument("--compile", action="store_true", help="torch.compile the model (aot_eager)")
    p.add_argument("--truth", type=Path, default=None)
    p.add_argument(
        "--track",
        action="store_true",
        help="also record the loss as an ML run named after the job, and log into $MLGOODPUT_CONSOLE if set",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    t_process = time.time()
    a = _args(argv)
    import torch
    import torch.distributed as _dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    import mlgoodput.torch as mt
    from mlgoodput.torch import checkpoint as ckpt

    dist: Any = _dist  # the c10d store classes are not in its stubs' exports
    ident = mt.torchrun_identity()
    gp = mt.TorchRecorder(job_name=a.job, store=a.store, peak_flops_per_s=1e11)

    def say(**kw: Any) -> None:
        if ident.rank != 0:
            return
        kw.setdefault("t", time.time())
        line = json.dumps({"attempt": ident.attempt, **kw})
        print(line, flush=True)
        if a.truth is not None:
            with a.truth.open("a") as f:
                f.write(line + "\n")

    say(phase="start", t=t_process, world_size=ident.world_size)
    run = _track(a) if a.track else None
    if a.compile:
        mt.init(job_name=a.job, recorder=gp, store=a.store, interval_s=0.5)
    with gp.job():
        say(phase="job_start")
        with gp.accelerator_init():
            # The agent's store outlives a restart: keys under this attempt's own prefix keep
            # a restarted rank from meeting the dead attempt's addresses.
            store = dist.TCPStore(
                os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), ident.world_size, is_master=False
            )
            dist.init_process_group(
                "gloo",
                store=dist.PrefixStore(f"attempt-{ident.attempt}", store),
                rank=ident.rank,
                world_size=ident.world_size,
            )
        with gp.training_preparation():
            torch.manual_seed(0)
            model: nn.Module = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1)))
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            step_fn = torch.compile(model, backend="aot_eager") if a.compile else model
        first = 0
        done = sorted(int(p.name.split("_")[1]) for p in a.ckpt_dir.glob("step_*") if (p / ".done").exists())
        if done:
            restored = done[-1]
            state = {"model": model.state_dict(), "opt": opt.state_dict()}
            ckpt.load(state, checkpoint_id=str(a.ckpt_dir / f"step_{restored}"), recorder=gp, step=restored)
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["opt"])
            first = restored + 1
            say(phase="restore", step=restored)

        def batches() -> Iterator[tuple[Any, Any]]:
            g = torch.Generator().manual_seed(ident.rank)
            late = random.Random(a.slow_seed)
            jitter = random.Random(f"{a.slow_seed}-{ident.rank}")  # a noisy input pipeline, on every rank
            for _ in range(first, a.steps):
                if a.jitter_s > 0:
                    time.sleep(jitter.expovariate(1 / a.jitter_s))
                if a.slow_rank == ident.rank and late.random() < a.slow_share:
                    time.sleep(a.slow_s)
                yield torch.randn(16, 32, generator=g), torch.randn(16, 1, generator=g)

        for step, (x, y) in gp.steps(batches(), start=first):
            say(phase="step", step=step)
            if a.kill_at_step == step and ident.attempt == 0 and ident.rank == a.kill_rank:
                os.kill(os.getpid(), signal.SIGKILL)
            opt.zero_grad()
            loss: Any = nn.functional.mse_loss(step_fn(x), y)
            loss.backward()
            opt.step()
            time.sleep(a.step_s)
            say(phase="step_end", step=step, loss=float(loss.detach()))
            if run is not None:
                from mlgoodput.diagnostics import metrics

                metrics.record("loss", float(loss.detach()), step=step)
                logging.getLogger("demo").info("rank %d step %d loss %.4f", ident.rank, step, float(loss.detach()))
            if (step + 1) % a.ckpt_every == 0:
                path = a.ckpt_dir / f"step_{step}"
                ckpt.save(
                    {"model": model.state_dict(), "opt": opt.state_dict()},
                    checkpoint_id=str(path),
                    recorder=gp,
                    step=step,
                )
                dist.barrier()
                if ident.rank == 0:
                    (path / ".done").touch()
                say(phase="checkpoint", step=step)
        dist.barrier()
        dist.destroy_process_group()
    if a.compile:
        st = mt.compile_stats()
        say(phase="compile", compiles=st.compiles if st else 0, recompiles=st.recompiles if st else 0)
        mt.shutdown()
    say(phase="done", step_flops=gp.step_flops)
    gp.close()
    if run is not None:
        from mlgoodput import console

        run.end(10)
        console.disconnect(5)
    return 0


def _track(a: argparse.Namespace) -> Any:
    """The job's ML run on this rank (the workload id is the job: a restart continues it),
    after joining the console session named in the environment, if any."""
    from mlgoodput import _env, console
    from mlgoodput.diagnostics import machinelearning_run

    if os.environ.get(_env.CONSOLE):
        try:
            console.connect()
        except (OSError, ValueError) as e:  # the training goes on without its logs
            print(f"rank {os.environ.get('RANK')}: logs not sent to the console ({e})", file=sys.stderr)
    configs = {"model": "Linear(32, 64) ReLU Linear(64, 1)", "optimizer": "SGD", "lr": 0.01, "steps": a.steps}
    return machinelearning_run(name=a.job, configs=configs, framework="PYTORCH", run_workload_id=a.job, store=a.store)


if __name__ == "__main__":
    raise SystemExit(main())
