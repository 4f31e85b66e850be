"""Helpers for the torch tests: a free loopback port and a real torchrun."""

from __future__ import annotations

import os
import socket
import subprocess
import sys


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torchrun(
    args: list[str],
    *,
    nproc: int = 2,
    max_restarts: int = 1,
    timeout_s: float = 120.0,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the torch workload under a real torchrun (c10d rendezvous on 127.0.0.1)."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=1",
        f"--nproc-per-node={nproc}",
        f"--max-restarts={max_restarts}",
        "--monitor-interval=0.1",
        "--rdzv-backend=c10d",
        f"--rdzv-endpoint=127.0.0.1:{free_port()}",
        "-m",
        "mlgoodput.torch._workload",
        *args,
    ]
    e = dict(os.environ, OMP_NUM_THREADS="1", **(env or {}))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=e, check=False)
