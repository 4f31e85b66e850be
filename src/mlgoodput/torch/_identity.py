"""Who this process is in a torchrun / torch.distributed job, read from the launcher's variables.

torchrun (the elastic agent) sets RANK, LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RESTART_COUNT and
TORCHELASTIC_RUN_ID in every worker. Each restart of the worker group starts new processes
that record a new `job_start`: one more attempt of the job. Rank 0 leads the accounting
(the lowest process index, docs/accounting.md "Hosts"); every rank's step starts feed the
per-host step statistics and the straggler analysis.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["TorchrunIdentity", "torchrun_identity"]


@dataclass(frozen=True, slots=True)
class TorchrunIdentity:
    """One worker of a torchrun job: its ranks, the job's size, and the agent's restart count."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    restart_count: int = 0  # restarts of the worker group so far (0 on the first attempt)
    run_id: str | None = None  # the rendezvous run id, the same across restarts
    hostname: str = ""
    launched: bool = False  # True when the variables came from a launcher

    @property
    def is_lead(self) -> bool:
        """Rank 0 leads the accounting."""
        return self.rank == 0

    @property
    def attempt(self) -> int:
        """This attempt's number (0 first): the elastic agent's restart count."""
        return self.restart_count

    def default_job_name(self) -> str:
        """A job name shared by every rank and every restart: `torchrun-<run id>`."""
        return f"torchrun-{self.run_id}" if self.run_id else "torch_job"


def _int(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = env.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        v = int(raw.strip())
    except ValueError:
        raise ValueError(f"${name} must be an integer, got {raw!r}") from None
    if v < minimum:
        raise ValueError(f"${name} must be >= {minimum}, got {raw!r}")
    return v


def torchrun_identity(env: Mapping[str, str] | None = None) -> TorchrunIdentity:
    """This process's identity from torchrun's variables (`env`: default os.environ); a
    process started without a launcher is rank 0 of 1. An initialized torch.distributed
    process group, when there is one, wins for rank and world size."""
    e = os.environ if env is None else env
    rank = _int(e, "RANK", 0, 0)
    world = _int(e, "WORLD_SIZE", 1, 1)
    if env is None:
        pg = _process_group()
        if pg is not None:
            rank, world = pg
    if rank >= world:
        raise ValueError(f"$RANK ({rank}) must be below $WORLD_SIZE ({world})")
    run_id = e.get("TORCHELASTIC_RUN_ID") or None
    return TorchrunIdentity(
        rank=rank,
        local_rank=_int(e, "LOCAL_RANK", 0, 0),
        world_size=world,
        restart_count=_int(e, "TORCHELASTIC_RESTART_COUNT", 0, 0),
        run_id=run_id,
        hostname=socket.gethostname(),
        launched="RANK" in e or "TORCHELASTIC_RUN_ID" in e,
    )


def _process_group() -> tuple[int, int] | None:
    """(rank, world size) of an initialized default process group; never imports torch."""
    import sys

    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), int(dist.get_world_size())
    except Exception:  # a torch we do not understand: the environment decides
        return None
    return None
