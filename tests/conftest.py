"""Shared test setup: the helpers beside the tests (timelines, waiting) importable, and one
isolation fixture every test gets."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

# A suite started in the background of a shell without job control (`cmd &` in a script,
# nohup) inherits SIGINT ignored, and so would every child the Ctrl-C tests start: they need a
# Ctrl-C to reach those children, so the suite takes SIGINT back (children then get the default).
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

#: Settings from the environment that would point a test at shared places or change what
#: it measures (cloud project, launcher ranks and ids); every MLGOODPUT_* variable goes too.
_OUTSIDE_VARS = (
    "GOOGLE_CLOUD_PROJECT",
    "GCLOUD_PROJECT",
    "GCP_PROJECT",
    "CLOUDSDK_CORE_PROJECT",
    "GCE_METADATA_HOST",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "JAX_PROCESS_ID",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_RUN_ID",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "SLURM_LOCALID",
    "SLURM_RESTART_COUNT",
    "SLURM_JOB_ID",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
    "PMIX_RANK",
    "PMIX_SIZE",
    "PMIX_LOCAL_RANK",
    "TPU_WORKER_ID",
    "CLOUD_TPU_TASK_ID",
    "TPU_WORKER_HOSTNAMES",
)


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test gets its own data directory (default store, fallback journals, runtime
    files) under its tmp_path, and no mlgoodput or cloud settings from the environment."""
    for var in list(os.environ):
        if var.startswith("MLGOODPUT_") or var in _OUTSIDE_VARS:
            monkeypatch.delenv(var)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return tmp_path


@pytest.fixture(params=["on", "off"], ids=["numpy", "no-numpy"])
def numpy_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Runs a test with the numpy fast paths ("on") and without them ("off",
    MLGOODPUT_NUMPY=0): the results must be the same either way."""
    from mlgoodput.accounting import _fast

    if request.param == "off":
        monkeypatch.setenv("MLGOODPUT_NUMPY", "0")
    else:
        pytest.importorskip("numpy")
        monkeypatch.delenv("MLGOODPUT_NUMPY", raising=False)
    _fast.reset()
    yield str(request.param)
    _fast.reset()
