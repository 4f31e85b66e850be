"""Every identity test starts from an environment with no launcher variables, no JAX or
torch runtime visible, and fresh once-only warnings."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

LAUNCHER_VARS = (
    "MLGOODPUT_PROCESS_INDEX", "MLGOODPUT_WORKLOAD_ID", "JAX_PROCESS_ID", "RANK", "WORLD_SIZE", "LOCAL_RANK",
    "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_RUN_ID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
    "SLURM_RESTART_COUNT", "SLURM_JOB_ID", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "PMIX_RANK", "PMIX_SIZE",
    "PMIX_LOCAL_RANK", "TPU_WORKER_ID", "CLOUD_TPU_TASK_ID", "TPU_WORKER_HOSTNAMES",
)


@pytest.fixture(autouse=True)
def clean_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from mlgoodput import identity

    for var in LAUNCHER_VARS:
        monkeypatch.delenv(var, raising=False)
    # another test may have started JAX (or torch) in this process: an initialized runtime
    # wins over the environment, so hide them here (the runtime tests install fakes)
    for mod in ("jax", "jax._src.distributed", "jax._src.xla_bridge", "torch", "torch.distributed"):
        monkeypatch.delitem(sys.modules, mod, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("MLGOODPUT_JOURNAL_DIR", raising=False)
    monkeypatch.delenv("MLGOODPUT_STORE", raising=False)
    identity._warned.clear()
    yield
    identity._warned.clear()
