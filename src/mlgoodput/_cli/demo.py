"""`mlgoodput demo`: a short training-like job that is killed and restarted, then its report,
the checkpoint advice and the next commands to try."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="run a short job that crashes and restarts, then print its goodput report",
        description="Runs a training job (a small JAX model on the CPU when JAX is installed; "
        "about a minute), kills it with SIGKILL midway, "
        "restarts it from its last checkpoint and prints the report of the job. Every demo keeps "
        "its own job (demo, demo-sim, demo-torch) in one store, OUTPUT_DIR/demo.db.",
    )
    p.add_argument("--store", default=None, help="store URL (default: OUTPUT_DIR/demo.db, shared by the demos)")
    p.add_argument("--output-dir", default="demo-output", help="where the demo writes")
    p.add_argument(
        "--job", default=None, help="job name (default: demo for JAX, demo-sim without it, demo-torch for torch)"
    )
    p.add_argument(
        "--framework",
        choices=("jax", "torch"),
        default=None,
        help="torch: two CPU ranks under torchrun, one killed; jax: the JAX workload (default: JAX when installed, else a simulated one)",
    )
    p.add_argument(
        "--workload",
        default=None,
        help="workload module (default: mlgoodput._demo.workload_jax when JAX is installed, else workload_sim)",
    )
    p.add_argument("--steps", type=int, default=None, help="training steps (default: 100; torch: 40)")
    p.add_argument("--kill-at-step", type=int, default=None)
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply every duration (0.1: ten times faster)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from mlgoodput._cli import CLIError

    if args.framework == "torch":
        from mlgoodput._demo.torchrun import TORCH_JOB, run_torch_demo

        res = run_torch_demo(
            Path(args.output_dir), args.store, args.job or TORCH_JOB, _or(args.steps, 40), args.kill_at_step
        )
    else:
        from mlgoodput._demo.supervisor import JAX_WORKLOAD, DemoConfig, default_workload, run_demo

        cfg = DemoConfig(
            output_dir=Path(args.output_dir),
            store=args.store,
            job=args.job or "",
            workload=args.workload or (JAX_WORKLOAD if args.framework == "jax" else default_workload()),
            steps=_or(args.steps, 100),
            kill_at_step=args.kill_at_step,
            time_scale=args.time_scale,
        )
        res = run_demo(cfg)
    if res.error:
        raise CLIError(f"the demo failed: {res.error}")
    rc = _command("report", ["report", "--job", res.job, "--store", res.store])
    if rc == 0:
        try:
            _command("advise", ["advise", "--job", res.job, "--store", res.store])
        except Exception as e:  # the advice is extra: the demo and its report stand without it
            print(f"(no advice: {e})", flush=True)
    from mlgoodput._demo.supervisor import next_steps

    print(next_steps(res.job, res.store, res.tensorboard_dir), flush=True)
    return rc


def _or(value: int | None, default: int) -> int:
    return default if value is None else value


def _command(module: str, argv: list[str]) -> int:
    """Run `mlgoodput ARGV` (a command of `mlgoodput._cli.MODULE`) here, echoing it first."""
    import importlib

    print("\n$ mlgoodput " + " ".join(argv), flush=True)
    parser = argparse.ArgumentParser(prog="mlgoodput")
    importlib.import_module(f"mlgoodput._cli.{module}").register(parser.add_subparsers())
    args = parser.parse_args(argv)
    rc: int = args.func(args)
    sys.stdout.flush()
    return rc
