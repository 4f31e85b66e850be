"""GoodputRecorder: every call becomes the right event, bad input raises at the call,
storage trouble never does, and nothing recorded is lost."""

from __future__ import annotations

import datetime as dt
import os
import signal
import sqlite3
import subprocess
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlgoodput import goodput
from mlgoodput._recorder import detect_process_index
from mlgoodput._recovery import recover_journals
from mlgoodput.events import Event, Kind
from mlgoodput.goodput_elastic import ElasticGoodputRecorder
from mlgoodput.store import open_store
from waiting import wait_for

SRC = str(Path(__file__).resolve().parents[2] / "src")
PROC = str(Path(__file__).with_name("_proc.py"))
UTC = dt.UTC
T0 = dt.datetime(2026, 1, 1, tzinfo=UTC)


def at(s: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=s)


def read(store: str, job: str, ns: str | None = None) -> list[Event]:
    """The job's events as recorded, less the journal's own signs of life (their test:
    tests/accounting/test_dead_jobs.py)."""
    st_ = open_store(store)
    try:
        return [e for e in st_.read(ns or f"goodput_{job}", job).columns.events() if e.kind is not Kind.ALIVE]
    finally:
        if not store.startswith("memory://"):
            st_.close()


def kinds(events: list[Event]) -> list[str]:
    return [e.kind.name for e in events]


def test_every_call_records_its_event() -> None:
    url = "memory://rec-all"
    with goodput.Recorder("j1", "goodput_j1", True, store=url, process_index=2) as r:
        r.record_job_start_time(at(0))
        r.record_tpu_init_start_time(at(1))
        r.record_tpu_init_end_time(at(2))
        r.record_training_preparation_start_time(at(3))
        r.record_checkpoint_restore_start_time(40, at(3.5))
        r.record_checkpoint_restore_end_time(40, at(3.7))
        r.record_training_preparation_end_time(at(4))
        r.record_data_loading_start_time(at(5))
        r.record_data_loading_end_time(at(6))
        r.record_step_start_time(41, at(7))
        r.record_custom_badput_event_start_time(at(7.5), custom_badput_event_type="eval_step")
        r.record_custom_badput_event_end_time(at(7.6), custom_badput_event_type="eval_step")
        r.record_step_end_time(41, at(8))
        r.record_checkpoint_save_start_time(41, at(8))
        r.record_checkpoint_save_end_time(41, at(8.5))
        r.record_job_end_time(at(9))
        assert r.flush(30)
    got = read(url, "j1")
    assert {e.host for e in got} == {2}
    assert kinds(got) == [
        "JOB_START",
        "ACCEL_INIT_START",
        "ACCEL_INIT_END",
        "TRAINING_PREP_START",
        "CKPT_RESTORE_START",
        "CKPT_RESTORE_END",
        "TRAINING_PREP_END",
        "DATA_LOADING_START",
        "DATA_LOADING_END",
        "STEP_START",
        "CUSTOM_START",
        "CUSTOM_END",
        "STEP_END",
        "CKPT_SAVE_START",
        "CKPT_SAVE_END",
        "JOB_END",
    ]
    assert [e.time - T0.timestamp() for e in got] == pytest.approx(
        [0, 1, 2, 3, 3.5, 3.7, 4, 5, 6, 7, 7.5, 7.6, 8, 8, 8.5, 9], abs=1e-5
    )
    assert [e.step for e in got if e.step is not None] == [40, 40, 41, 41, 41, 41]
    assert [e.name for e in got if e.name] == ["eval_step", "eval_step"]


def test_elastic_calls() -> None:
    url = "memory://rec-elastic"
    r = ElasticGoodputRecorder("e1", "goodput_e1", True, store=url, process_index=0)
    r.record_job_start_time(at(0))
    r.record_elastic_slice_counts(active_slices=2, total_slices=4, available_slices=3, timestamp=at(1))
    r.record_elastic_wait_start_time("slice_down", at(2))
    r.record_elastic_wait_end_time(event_type="slice_down", end_time=at(3))
    r.record_elastic_reinit_start_time(at(4))
    r.record_elastic_reinit_end_time(at(5))
    r.record_elastic_wait_start_time("scale_up", at(6))
    r.record_elastic_wait_end_time("scale_up", at(7))
    assert r.close()
    got = read(url, "e1")
    assert kinds(got) == [
        "JOB_START",
        "SLICE_COUNTS",
        "ELASTIC_WAIT_START",
        "ELASTIC_WAIT_END",
        "ELASTIC_REINIT_START",
        "ELASTIC_REINIT_END",
        "ELASTIC_WAIT_START",
        "ELASTIC_WAIT_END",
    ]
    assert got[1].attrs == {"active": 2, "total": 4, "available": 3}
    assert [e.name for e in got if e.kind in (Kind.ELASTIC_WAIT_START, Kind.ELASTIC_WAIT_END)] == [
        "slice_down",
        "slice_down",
        "scale_up",
        "scale_up",
    ]


def test_times_default_to_now_and_naive_means_local() -> None:
    url = "memory://rec-times"
    r = goodput.GoodputRecorder("t1", "goodput_t1", True, store=url, process_index=0)
    before = time.time()
    r.record_job_start_time()
    after = time.time()
    naive = dt.datetime(2026, 3, 1, 12, 0, 0)
    r.record_step_start_time(0, naive)
    r.close()
    got = read(url, "t1")
    assert before <= got[0].time <= after
    assert got[1].time == naive.astimezone().timestamp()


def test_logging_disabled_records_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "off.db")
    r = goodput.GoodputRecorder("off", "goodput_off", store=db, process_index=0)
    r.record_job_start_time()
    for i in range(10):
        r.record_step_start_time(i)
    r.record_job_end_time()
    assert r.flush() and r.close()
    assert not Path(db).exists()
    assert not Path(db + ".mlgoodput-journals").exists()


def _rec(url: str = "memory://rec-bad") -> goodput.GoodputRecorder:
    return goodput.GoodputRecorder("bad", "goodput_bad", True, store=url, process_index=0)


def test_bad_construction_arguments() -> None:
    with pytest.raises(ValueError, match="nosuch"):
        goodput.GoodputRecorder("j", "l", True, store="nosuch://x")
    with pytest.raises(ValueError, match="job_name"):
        goodput.GoodputRecorder("", "l", True, store="memory://x")
    with pytest.raises(ValueError, match="process_index"):
        goodput.GoodputRecorder("j", "l", True, store="memory://x", process_index=-2)


# every variable mlgoodput.identity reads for a process index (docs/recording.md, "Who a process is")
_IDENTITY_VARS = (
    "MLGOODPUT_PROCESS_INDEX",
    "JAX_PROCESS_ID",
    "RANK",
    "WORLD_SIZE",
    "SLURM_PROCID",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "PMIX_RANK",
    "PMIX_SIZE",
    "TPU_WORKER_ID",
    "CLOUD_TPU_TASK_ID",
    "TPU_WORKER_HOSTNAMES",
)


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({}, 0),
        ({"RANK": "3"}, 3),
        ({"SLURM_PROCID": "5"}, 5),
        ({"JAX_PROCESS_ID": "2", "RANK": "9"}, 2),
        ({"OMPI_COMM_WORLD_RANK": "x", "PMI_RANK": "4"}, 4),
        ({"TPU_WORKER_ID": "6"}, 6),
        ({"CLOUD_TPU_TASK_ID": "1"}, 1),
    ],
)
def test_process_index_from_launcher_environment(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], want: int
) -> None:
    # Another test may have started JAX in this process, and an initialized JAX runtime wins
    # over the environment (tested in a subprocess below): hide it here.
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    for var in _IDENTITY_VARS:  # $MLGOODPUT_PROCESS_INDEX wins over all the others: unset too
        monkeypatch.delenv(var, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert detect_process_index() == want
    assert goodput.GoodputRecorder("p", "l", store="memory://p").process_index == want


@pytest.mark.slow
def test_process_index_from_jax_only_once_it_is_initialized() -> None:
    code = (
        "import jax, jax._src.xla_bridge as xb\n"
        "from mlgoodput.goodput import GoodputRecorder\n"
        "a = GoodputRecorder('j', 'l', store='memory://j').process_index\n"
        "assert not xb.backends_are_initialized(), 'the recorder initialized JAX'\n"
        "jax.devices()\n"
        "b = GoodputRecorder('j', 'l', store='memory://j').process_index\n"
        "print(a, b)\n"
    )
    env = {**os.environ, "PYTHONPATH": SRC, "RANK": "5", "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["5", "0"]  # launcher rank until JAX runs, then JAX's index


@pytest.mark.slow
def test_sigkill_loses_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "k.db")
    env = {**os.environ, "PYTHONPATH": SRC}
    p = subprocess.Popen(
        [sys.executable, PROC, "kill", db, "killed", "0", "1000"], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGKILL)
        assert p.wait(30) == -signal.SIGKILL
    finally:
        if p.poll() is None:
            p.kill()
    recover_journals(db)
    got = read(db, "killed")
    c = Counter(kinds(got))
    assert c == Counter(
        {
            "JOB_START": 1,
            "ACCEL_INIT_START": 1,
            "ACCEL_INIT_END": 1,
            "STEP_START": 1000,
            "CKPT_SAVE_START": 10,
            "CKPT_SAVE_END": 10,
            "CUSTOM_START": 1,
        }
    )
    assert sorted(e.step or 0 for e in got if e.kind is Kind.STEP_START) == list(range(1000))


@pytest.mark.slow
def test_many_processes_write_one_store(tmp_path: Path) -> None:
    db = str(tmp_path / "many.db")
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": SRC}
    writers = [("a", 0), ("a", 1), ("b", 0), ("c", 0)]
    n = 3000
    procs = [
        subprocess.Popen(
            [sys.executable, PROC, "write", db, job, str(host), str(n), str(go)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for job, host in writers
    ]
    assert wait_for(lambda: all(Path(f"{go}.ready-{job}-{host}").exists() for job, host in writers), 120)
    go.write_text("go")
    for p in procs:
        _, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        assert "Traceback" not in err and "WARNING" not in err.upper(), err
    per_event = n + n // 100 * 2 + 6  # steps, saves, job/init/custom starts and ends
    for job, hosts in (("a", {0, 1}), ("b", {0}), ("c", {0})):
        got = read(db, job)
        assert len(got) == per_event * len(hosts)
        for h in hosts:
            mine = [e for e in got if e.host == h]
            assert sorted(e.step or 0 for e in mine if e.kind is Kind.STEP_START) == list(range(n))
            assert len(set(mine)) == len(mine) == per_event
    # the store counts each writer's signs of life too: one at its job start, more if it idled
    jobs = {j.job: j.events for j in open_store(db).jobs()}
    assert jobs.keys() == {"a", "b", "c"}
    for job, hosts in (("a", 2), ("b", 1), ("c", 1)):
        assert per_event * hosts + hosts <= jobs[job] <= per_event * hosts + 100 * hosts


def test_locked_store_never_raises_and_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "locked.db"
    open_store(str(db)).jobs()
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    r = goodput.GoodputRecorder("lk", "goodput_lk", True, store=str(db), process_index=0)
    try:
        r.record_job_start_time()
        for i in range(300):
            r.record_step_start_time(i)
        assert r.flush(0.3) is False
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert r.flush(60)
    r.record_job_end_time()
    assert r.close(60)
    got = read(str(db), "lk")
    assert len(got) == 302 and kinds(got)[-1] == "JOB_END"


def test_unwritable_store_never_raises_and_recovers(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("in the way")
    db = str(blocker / "s.db")
    r = goodput.GoodputRecorder("uw", "goodput_uw", True, store=db, process_index=0)
    r.record_job_start_time()
    for i in range(50):
        r.record_step_start_time(i)
    assert r.flush(0.5) is False
    blocker.unlink()
    assert r.close(60)
    assert len(read(db, "uw")) == 51


@pytest.mark.forks
def test_forked_child_records_into_its_own_journal(tmp_path: Path) -> None:
    db = str(tmp_path / "fork.db")
    r = goodput.GoodputRecorder("fk", "goodput_fk", True, store=db, process_index=0)
    r.record_job_start_time(at(0))
    assert r.flush(30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 1
        try:
            for i in range(1000, 1100):
                r.record_step_start_time(i, at(i))
            code = 0 if r.flush(30) else 2
        finally:
            os._exit(code)
    for i in range(100):
        r.record_step_start_time(i, at(i))
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert r.close(30)
    steps = sorted(e.step for e in read(db, "fk") if e.step is not None)
    assert steps == list(range(100)) + list(range(1000, 1100))


@pytest.mark.filterwarnings("ignore::mlgoodput.MlGoodputWarning")  # random steps go back: warned, kept
@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 10**9), st.floats(0, 1e6, allow_nan=False)), max_size=50),
    st.lists(st.sampled_from(["eval", "sdc_check", "Ünïcode"]), max_size=5),
)
def test_property_steps_and_custom_events_arrive_as_recorded(
    steps: list[tuple[int, float]], customs: list[str]
) -> None:
    url = "memory://rec-prop"
    store = open_store(url)
    cursor = store.read("goodput_p", "p").cursor
    r = goodput.GoodputRecorder("p", "goodput_p", True, store=url, process_index=1)
    for s, t in steps:
        r.record_step_start_time(s, at(t))
    for name in customs:
        r.record_custom_badput_event_start_time(at(1), name)
        r.record_custom_badput_event_end_time(at(2), name)
    assert r.close()
    got = list(store.read("goodput_p", "p", cursor).columns.events())
    want = [Event(Kind.STEP_START, at(t).timestamp(), 1, step=s) for s, t in steps]
    for name in customs:
        want += [
            Event(Kind.CUSTOM_START, at(1).timestamp(), 1, name=name),
            Event(Kind.CUSTOM_END, at(2).timestamp(), 1, name=name),
        ]
    assert got == want


def test_a_fresh_calculator_sees_every_event_of_a_killed_process(tmp_path: Path) -> None:
    db = str(tmp_path / "calc.db")
    open_store(db).jobs()
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # the worker ships nothing before it dies
    env = {**os.environ, "PYTHONPATH": SRC}
    p = subprocess.Popen(
        [sys.executable, PROC, "kill", db, "calc", "0", "500"], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGKILL)
        p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
        blocker.execute("ROLLBACK")
        blocker.close()
    assert read(db, "calc") == []
    calc = goodput.GoodputCalculator("calc", "goodput_calc", store=db)
    rep = calc.report()
    assert rep.last_step == 499
    assert rep.disruptions == 0
    assert rep.productive_s + sum(
        v if isinstance(v, float) else sum(v.values())
        for k, v in rep.badput_s.items()
        if k is not goodput.BadputType.DATA_LOADING_ASYNC
    ) == pytest.approx(rep.total_s)
    assert len(read(db, "calc")) == 500 + 10 + 4


def test_a_process_that_exits_without_close_ships_at_exit(tmp_path: Path) -> None:
    db = str(tmp_path / "exit.db")
    code = (
        "from mlgoodput.goodput import GoodputRecorder\n"
        f"r = GoodputRecorder('ex', 'goodput_ex', True, store={db!r}, process_index=0)\n"
        "r.record_job_start_time()\n"
        "for i in range(2000):\n"
        "    r.record_step_start_time(i)\n"
    )
    env = {**os.environ, "PYTHONPATH": SRC}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert len(read(db, "ex")) == 2001  # read straight from the store: no recovery needed
    assert not list(Path(db + ".mlgoodput-journals").glob("*.seg"))
