"""`mlgoodput demo`: a short training-like job that is killed and restarted, then its report."""

from __future__ import annotations

import argparse
from typing import Any


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="run a short job that crashes and restarts, then print its goodput report",
        description="Runs a training job (a small JAX model on the CPU when JAX is installed; "
        "about a minute), kills it with SIGKILL midway, "
        "restarts it from its last checkpoint and prints the report of the job.",
    )
    p.add_argument("--store", default=None, help="store URL (default: a fresh demo-output/demo.db)")
    p.add_argument("--output-dir", default="demo-output", help="where the demo writes")
    p.add_argument("--job", default="demo", help="job name (default: demo)")
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
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--kill-at-step", type=int, default=None)
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply every duration (0.1: ten times faster)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    if args.framework == "torch":
        from mlgoodput._demo.torchrun import run_torch_demo

        return run_torch_demo(Path(args.output_dir), args.store, args.job, args.steps, args.kill_at_step)
    from mlgoodput._demo.supervisor import JAX_WORKLOAD, DemoConfig, default_workload, run_demo

    cfg = DemoConfig(
        output_dir=Path(args.output_dir),
        store=args.store,
        job=args.job,
        workload=args.workload or (JAX_WORKLOAD if args.framework == "jax" else default_workload()),
        steps=args.steps,
        kill_at_step=args.kill_at_step,
        time_scale=args.time_scale,
    )
    return run_demo(cfg)
