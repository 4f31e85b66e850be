"""mlgoodput.identity: each source, the precedence between them, bad values, and the same
answer in every part that asks (the recorder, diagnostics, mlgoodput.jax, mlgoodput.torch)."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import types
import warnings
from pathlib import Path

import pytest

from mlgoodput.identity import SOURCES, ProcessIdentity, detect_identity

SRC = str(Path(__file__).resolve().parents[2] / "src")


def _detect(env: dict[str, str]) -> ProcessIdentity:
    return detect_identity(env=env)


# (environment, (index, count, local rank, attempt, source))
EACH_SOURCE = [
    ({}, (0, 1, 0, 0, "default")),
    ({"MLGOODPUT_PROCESS_INDEX": "7"}, (7, None, 0, 0, "MLGOODPUT_PROCESS_INDEX")),
    ({"JAX_PROCESS_ID": "2"}, (2, None, 0, 0, "JAX_PROCESS_ID")),
    ({"RANK": "3"}, (3, None, 0, 0, "torchrun")),
    ({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "TORCHELASTIC_RESTART_COUNT": "2"}, (3, 8, 1, 2, "torchrun")),
    (
        {"SLURM_PROCID": "5", "SLURM_NTASKS": "16", "SLURM_LOCALID": "3", "SLURM_RESTART_COUNT": "1"},
        (5, 16, 3, 1, "slurm"),
    ),
    (
        {"OMPI_COMM_WORLD_RANK": "4", "OMPI_COMM_WORLD_SIZE": "6", "OMPI_COMM_WORLD_LOCAL_RANK": "0"},
        (4, 6, 0, 0, "mpi"),
    ),
    ({"PMI_RANK": "9", "PMI_SIZE": "10", "MPI_LOCALRANKID": "1"}, (9, 10, 1, 0, "mpi")),
    ({"PMIX_RANK": "1"}, (1, None, 0, 0, "mpi")),
    ({"TPU_WORKER_ID": "6", "TPU_WORKER_HOSTNAMES": "a,b,c,d,e,f,g,h"}, (6, 8, 0, 0, "tpu")),
    ({"CLOUD_TPU_TASK_ID": "1"}, (1, None, 0, 0, "tpu")),
]


@pytest.mark.parametrize(("env", "want"), EACH_SOURCE)
def test_each_source(env: dict[str, str], want: tuple[object, ...]) -> None:
    i = _detect(env)
    assert (i.process_index, i.process_count, i.local_rank, i.attempt, i.source) == want
    assert i.pid == os.getpid() and i.hostname == socket.gethostname()
    assert i.source in SOURCES


def test_the_environment_is_read_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_PROCID", "2")
    monkeypatch.setenv("SLURM_JOB_ID", "4711")
    i = detect_identity()
    assert (i.process_index, i.source, i.job_name) == (2, "slurm", "4711")


def test_mpirun_inside_a_slurm_allocation_takes_the_mpi_rank() -> None:
    """mpirun in an sbatch script: every process inherits the SLURM_PROCID of the step that
    started it (the batch step, or the srun of one daemon per node), so several processes
    share one; only the MPI rank tells them apart. Slurm came first and all of them were
    recorded as the same host (the recorder read the MPI variables before Slurm's until the
    identity refactor)."""
    ranks = set()
    for r in range(4):
        env = {
            "SLURM_PROCID": "0",
            "SLURM_NTASKS": "4",
            "SLURM_LOCALID": "0",
            "OMPI_COMM_WORLD_RANK": str(r),
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_LOCAL_RANK": str(r),
        }
        i = _detect(env)
        assert (i.source, i.process_index, i.process_count, i.local_rank) == ("mpi", r, 4, r)
        ranks.add(i.process_index)
    assert ranks == {0, 1, 2, 3}
    # srun starting the tasks itself gives both, equal: either way the same answer
    assert _detect({"SLURM_PROCID": "3", "SLURM_NTASKS": "4", "PMIX_RANK": "3", "PMIX_SIZE": "4"}).process_index == 3


# each environment source, highest first: each beats every one after it
LADDER = [
    ("MLGOODPUT_PROCESS_INDEX", {"MLGOODPUT_PROCESS_INDEX": "1"}),
    ("JAX_PROCESS_ID", {"JAX_PROCESS_ID": "2"}),
    ("torchrun", {"RANK": "3"}),
    ("mpi", {"OMPI_COMM_WORLD_RANK": "4"}),
    ("slurm", {"SLURM_PROCID": "5"}),
    ("tpu", {"TPU_WORKER_ID": "6"}),
]


@pytest.mark.parametrize("hi", range(len(LADDER)))
def test_precedence_between_environment_sources(hi: int) -> None:
    name, env = LADDER[hi]
    for _, lower in LADDER[hi + 1 :]:
        got = _detect({**lower, **env})
        assert got.source == name, (env, lower)
        assert got.process_index == hi + 1
    # and the explicit argument beats all of them together
    everything = {k: v for _, e in LADDER for k, v in e.items()}
    got = detect_identity(11, env=everything)
    assert (got.process_index, got.source) == (11, "argument")


def test_the_argument_is_checked() -> None:
    for bad in (-1, True, 1.0, "2"):
        with pytest.raises(ValueError, match="process_index"):
            detect_identity(bad)  # type: ignore[arg-type]


def _fake_jax(monkeypatch: pytest.MonkeyPatch, process_id: int, num: int) -> None:
    state = types.SimpleNamespace(process_id=process_id, num_processes=num, client=object())
    monkeypatch.setitem(sys.modules, "jax", types.ModuleType("jax"))
    dist = types.ModuleType("jax._src.distributed")
    dist.global_state = state  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "jax._src.distributed", dist)


def _fake_torch(monkeypatch: pytest.MonkeyPatch, rank: int, world: int) -> None:
    dist = types.ModuleType("torch.distributed")
    dist.is_available = lambda: True  # type: ignore[attr-defined]
    dist.is_initialized = lambda: True  # type: ignore[attr-defined]
    dist.get_rank = lambda: rank  # type: ignore[attr-defined]
    dist.get_world_size = lambda: world  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)


def test_initialized_runtimes_between_the_own_variable_and_the_launchers(monkeypatch: pytest.MonkeyPatch) -> None:
    launchers = {"JAX_PROCESS_ID": "9", "RANK": "9", "SLURM_PROCID": "9"}
    for k, v in launchers.items():
        monkeypatch.setenv(k, v)
    _fake_torch(monkeypatch, 2, 4)
    i = detect_identity()
    assert (i.process_index, i.process_count, i.source) == (2, 4, "torch.distributed")
    _fake_jax(monkeypatch, 1, 4)
    i = detect_identity()
    assert (i.process_index, i.process_count, i.source) == (1, 4, "jax")  # JAX before torch
    monkeypatch.setenv("MLGOODPUT_PROCESS_INDEX", "3")
    assert detect_identity().source == "MLGOODPUT_PROCESS_INDEX"
    # an explicit env= leaves the runtimes out unless asked
    assert detect_identity(env=launchers).source == "JAX_PROCESS_ID"
    assert detect_identity(env=launchers, runtimes=True).source == "jax"


def test_an_uninitialized_runtime_does_not_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "jax", types.ModuleType("jax"))
    dist = types.ModuleType("jax._src.distributed")
    dist.global_state = types.SimpleNamespace(process_id=0, client=None)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "jax._src.distributed", dist)
    tdist = types.ModuleType("torch.distributed")
    tdist.is_available = lambda: True  # type: ignore[attr-defined]
    tdist.is_initialized = lambda: False  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.distributed", tdist)
    monkeypatch.setenv("RANK", "3")
    assert (detect_identity().process_index, detect_identity().source) == (3, "torchrun")


def test_jax_and_torch_are_never_imported() -> None:
    code = (
        "import sys\n"
        "from mlgoodput.identity import detect_identity\n"
        "from mlgoodput.goodput import GoodputRecorder\n"
        "i = detect_identity(); GoodputRecorder('j', 'l', store='memory://j')\n"
        "print(i.source, sorted(m for m in ('jax', 'torch') if m in sys.modules))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "MLGOODPUT_PROCESS_INDEX")}
    env["PYTHONPATH"] = SRC
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split(None, 1)[1].strip() == "[]"


@pytest.mark.parametrize(
    ("env", "want", "source", "named"),
    [
        ({"MLGOODPUT_PROCESS_INDEX": "x", "RANK": "3"}, 3, "torchrun", "MLGOODPUT_PROCESS_INDEX"),
        ({"JAX_PROCESS_ID": "-1", "SLURM_PROCID": "2"}, 2, "slurm", "JAX_PROCESS_ID"),
        ({"RANK": "4", "WORLD_SIZE": "4", "SLURM_PROCID": "1"}, 1, "slurm", "WORLD_SIZE"),
        ({"RANK": "1", "TORCHELASTIC_RESTART_COUNT": "two"}, 1, "torchrun", "TORCHELASTIC_RESTART_COUNT"),
        ({"OMPI_COMM_WORLD_RANK": "x", "PMI_RANK": "4"}, 4, "mpi", "OMPI_COMM_WORLD_RANK"),
        ({"TPU_WORKER_ID": "", "CLOUD_TPU_TASK_ID": "z"}, 0, "default", "CLOUD_TPU_TASK_ID"),
    ],
)
def test_a_bad_value_warns_once_and_the_next_source_decides(
    env: dict[str, str], want: int, source: str, named: str
) -> None:
    with pytest.warns(UserWarning, match=named) as caught:
        i = _detect(env)
    assert (i.process_index, i.source) == (want, source)
    assert len([w for w in caught if named in str(w.message)]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _detect(env).process_index == want  # said once: no second warning


def test_a_bad_local_rank_or_attempt_is_skipped() -> None:
    with pytest.warns(UserWarning, match="LOCAL_RANK"):
        i = _detect({"MLGOODPUT_PROCESS_INDEX": "2", "LOCAL_RANK": "a", "SLURM_LOCALID": "1"})
    assert (i.process_index, i.local_rank) == (2, 1)


def test_job_name_from_the_workload_variables() -> None:
    assert _detect({}).job_name is None
    assert _detect({"TORCHELASTIC_RUN_ID": "r1"}).job_name == "r1"
    assert _detect({"TORCHELASTIC_RUN_ID": "r1", "SLURM_JOB_ID": "77"}).job_name == "77"
    assert _detect({"SLURM_JOB_ID": "77", "MLGOODPUT_WORKLOAD_ID": "w"}).job_name == "w"
    assert _detect({"MLGOODPUT_WORKLOAD_ID": "none"}).job_name is None


def test_identity_is_a_frozen_value() -> None:
    i = _detect({"RANK": "1"})
    with pytest.raises(dataclasses.FrozenInstanceError):
        i.process_index = 2  # type: ignore[misc]
    assert not i.is_lead and _detect({}).is_lead


def test_rank_3_every_part_agrees(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The bug this module fixed: with RANK=3 the recorder said 3 and diagnostics said 0."""
    from mlgoodput._metric_pipeline import default_host
    from mlgoodput.diagnostics import _run as diag_run
    from mlgoodput.diagnostics import machinelearning_run
    from mlgoodput.goodput import GoodputRecorder
    from mlgoodput.torch import torchrun_identity

    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("MLGOODPUT_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.setenv("MLGOODPUT_PROFILE_DIR", str(tmp_path / "profiles"))
    assert GoodputRecorder("j", "l", store="memory://agree").process_index == 3
    assert diag_run.process_index_from_env() == 3
    assert default_host(None) == 3
    assert torchrun_identity().rank == 3
    run = machinelearning_run(name="agree", store="sqlite://" + str(tmp_path / "d.db"))
    try:
        assert run.process_index == 3
    finally:
        run.end()
