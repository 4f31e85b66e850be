"""Who this process is in a torchrun / torch.distributed job, read from the launcher's variables.

torchrun (the elastic agent) sets RANK, LOCAL_RANK, WORLD_SIZE, TORCHELASTIC_RESTART_COUNT and
TORCHELASTIC_RUN_ID in every worker. Each restart of the worker group starts new processes
that record a new `job_start`: one more attempt of the job. Rank 0 leads the accounting
(the lowest process index, docs/accounting.md "Hosts"); every rank's step starts feed the
per-host step statistics and the straggler analysis.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from mlgoodput.identity import detect_identity, from_torchrun

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


def torchrun_identity(env: Mapping[str, str] | None = None) -> TorchrunIdentity:
    """This process's identity from torchrun's variables (`env`: default os.environ); a
    process started without a launcher is rank 0 of 1. A torchrun variable that is not a
    usable integer raises ValueError naming it. The rank is the one every part of mlgoodput
    uses (`mlgoodput.identity.detect_identity`): an initialized torch.distributed process
    group, when there is one, wins over the environment."""
    e = os.environ if env is None else env
    tr = from_torchrun(e)  # checks torchrun's variables: a bad one fails here, naming it
    ident = detect_identity(env=e, runtimes=env is None)
    rank = ident.process_index
    world = ident.process_count
    if world is None:
        world = tr.count if tr is not None and tr.count is not None and tr.count > rank else rank + 1
    local = tr.local_rank if tr is not None and tr.local_rank is not None else ident.local_rank
    return TorchrunIdentity(
        rank=rank,
        local_rank=local,
        world_size=world,
        restart_count=ident.attempt,
        run_id=e.get("TORCHELASTIC_RUN_ID") or None,
        hostname=ident.hostname,
        launched="RANK" in e or "TORCHELASTIC_RUN_ID" in e,
    )
