"""Never throw into training: each kind of misuse records what it can, warns once (an
MlGoodputWarning plus a log line naming the call, the argument and the value), and strict
mode (`strict=True` or MLGOODPUT_STRICT=1) turns it into an MlGoodputMisuseError."""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import sys
import warnings
from collections.abc import Callable
from typing import Any

import pytest

import mlgoodput
from mlgoodput import goodput
from mlgoodput.events import Event, Kind
from mlgoodput.goodput_elastic import ElasticGoodputRecorder
from mlgoodput.store import open_store

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
Rec = goodput.Recorder


def at(s: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=s)


def _events(url: str, job: str) -> list[Event]:
    """The job's recorded events, less the signs of life the journal adds on its own."""
    return [e for e in open_store(url).read(f"goodput_{job}", job).columns.events() if e.kind is not Kind.ALIVE]


def _recorder(url: str, cls: type[Rec] = Rec, **kw: Any) -> Rec:
    job = url.split("//")[1]
    return cls(job, f"goodput_{job}", True, store=url, process_index=0, **kw)


Misuse = Callable[[Rec], None]
_ids = itertools.count()


def _run(
    kind: str,
    misuse: Misuse,
    want: list[tuple[str, int | None]],
    text: str,
    cls: type[Rec] = Rec,
    caplog: pytest.LogCaptureFixture | None = None,
) -> Rec:
    """Do the misuse twice: no exception, one warning naming `text`, the events in `want`."""
    url = f"memory://misuse-{kind}-{cls.__name__}-{next(_ids)}"
    r = _recorder(url, cls)
    r.record_job_start_time(at(0))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        misuse(r)
        misuse(r)
    ours = [w for w in caught if issubclass(w.category, mlgoodput.MlGoodputWarning)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert text in str(ours[0].message)
    assert ours[0].filename == __file__  # points at the caller, not at mlgoodput
    assert r.misuse_counts == {kind: 2}
    r.close()
    got = [(e.kind.name, e.step) for e in _events(url, url.split("//")[1])][1:]
    assert got == want
    return r


def test_end_without_start_is_recorded_and_warned_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "mlgoodput")

    def misuse(r: Rec) -> None:
        r.record_tpu_init_end_time(at(1))

    r = _run("end_without_start", misuse, [("ACCEL_INIT_END", None)] * 2, "record_tpu_init_end_time(end_time=")
    calc = goodput.GoodputCalculator(r.job_name, r.logger_name, store=r.store_url, clock=lambda: at(4).timestamp())
    rep = calc.report()  # the spec: an end without a start is ignored
    assert rep.total_s == pytest.approx(4.0)
    assert rep.badput_s[goodput.BadputType.TPU_INITIALIZATION] == 0.0
    assert rep.badput_s[goodput.BadputType.OTHER] == pytest.approx(4.0)
    # one message, the warning: no log line repeats it (it printed twice before)
    assert not [rec.getMessage() for rec in caplog.records if "end_without_start" in rec.getMessage()]


@pytest.mark.parametrize(
    ("call", "kind_name"),
    [
        ("record_job_end_time", "JOB_END"),
        ("record_training_preparation_end_time", "TRAINING_PREP_END"),
        ("record_data_loading_end_time", "DATA_LOADING_END"),
        ("record_custom_badput_event_end_time", "CUSTOM_END"),
    ],
)
def test_every_end_without_start_is_kept(call: str, kind_name: str) -> None:
    r = _recorder(f"memory://ends-{call}")
    with pytest.warns(mlgoodput.MlGoodputWarning, match=call):
        getattr(r, call)(at(1))
    r.close()
    assert [e.kind.name for e in _events(r.store_url, r.job_name)] == [kind_name]


def test_duplicate_end_is_recorded_and_counts_once() -> None:
    def misuse(r: Rec) -> None:
        r.record_checkpoint_save_end_time(5, at(2))

    url = "memory://misuse-dup"
    r = _recorder(url)
    r.record_job_start_time(at(0))
    r.record_checkpoint_save_start_time(5, at(1))
    r.record_checkpoint_save_end_time(5, at(2))
    with pytest.warns(mlgoodput.MlGoodputWarning, match=r"record_checkpoint_save_end_time\(step=5\)"):
        misuse(r)  # a retry of the same end
    r.record_job_end_time(at(10))
    r.close()
    calc = goodput.GoodputCalculator("misuse-dup", "goodput_misuse-dup", store=url)
    rep = calc.report()
    assert rep.badput_s[goodput.BadputType.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME] == pytest.approx(1.0)


def test_step_end_of_a_step_that_is_not_running() -> None:
    def misuse(r: Rec) -> None:
        r.record_step_end_time(6, at(3))

    _run(
        "end_without_start",
        misuse,
        [("STEP_START", 7), ("STEP_END", 6), ("STEP_END", 6)],
        "step 6 is not the running step",
        cls=_StepStarted,
    )


class _StepStarted(Rec):
    def record_job_start_time(self, start_time: dt.datetime | None = None) -> None:
        super().record_job_start_time(start_time)
        self.record_step_start_time(7, at(2))


def test_the_warning_points_at_the_callers_line() -> None:
    r = _recorder(f"memory://stack-{next(_ids)}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r.record_step_start_time(5, at(1))
        line = sys._getframe().f_lineno - 1
        r.record_step_start_time(3, at(2))
        line_back = sys._getframe().f_lineno - 1
        r.record_step_start_time(-1)
        line_bad = sys._getframe().f_lineno - 1
        r.record_job_end_time("later")  # type: ignore[arg-type]
        line_time = sys._getframe().f_lineno - 1  # the call's line, just above
    assert [(w.filename, w.lineno) for w in caught] == [
        (__file__, line_back),
        (__file__, line_bad),
        (__file__, line_time),
        (__file__, line_time),
    ]
    assert line < line_back
    r.close()


def test_steps_going_back_are_recorded() -> None:
    def misuse(r: Rec) -> None:
        r.record_step_start_time(3, at(5))
        r.record_step_start_time(7, at(6))

    _run("step_back", misuse, [("STEP_START", n) for n in (7, 3, 7, 3, 7)], "step number went back", cls=_StepStarted)


def test_start_twice_is_recorded() -> None:
    def misuse(r: Rec) -> None:
        r.record_data_loading_start_time(at(1))

    _run("start_twice", misuse, [("DATA_LOADING_START", None)] * 3, "started again before its end", cls=_LoadingStarted)


class _LoadingStarted(Rec):
    def record_job_start_time(self, start_time: dt.datetime | None = None) -> None:
        super().record_job_start_time(start_time)
        self.record_data_loading_start_time(at(0.5))


@pytest.mark.parametrize("step", [-1, 1.5, "x", True, None])
def test_a_step_that_is_not_a_step_is_dropped(step: object) -> None:
    def misuse(r: Rec) -> None:
        r.record_step_start_time(step)  # type: ignore[arg-type]

    _run("bad_step", misuse, [], f"record_step_start_time(step={step!r})")


def test_steps_the_seed_accepts_are_recorded() -> None:
    """The seed records int(step): numpy-like integers, whole floats and digit strings."""
    r = _recorder("memory://seed-steps")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r.record_step_start_time(2.0, at(1))  # type: ignore[arg-type]
        r.record_step_start_time("3", at(2))  # type: ignore[arg-type]
        r.record_checkpoint_save_start_time(4.0, at(3))  # type: ignore[arg-type]
    r.close()
    assert [e.step for e in _events(r.store_url, r.job_name)] == [2, 3, 4]


@pytest.mark.parametrize("when", ["now", dt.date(2026, 1, 1)])
def test_a_time_that_is_not_a_time_is_recorded_now(when: object) -> None:
    def misuse(r: Rec) -> None:
        r.record_step_start_time(1, when)  # type: ignore[arg-type]

    r = _run("bad_time", misuse, [("STEP_START", 1)] * 2, f"record_step_start_time(start_time={when!r})")
    assert r.misuse_counts == {"bad_time": 2}


def test_a_value_the_journal_cannot_hold_is_dropped() -> None:
    r = _recorder(f"memory://unrecordable-{next(_ids)}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r.record_step_start_time(2**70, at(1))
        r.record_custom_badput_event_start_time(at(2), "x" * 200_000)
        r.record_step_start_time(4, at(3))
    assert len(caught) == 1 and "cannot be journaled" in str(caught[0].message)
    assert len(str(caught[0].message)) < 400
    assert r.misuse_counts == {"unrecordable": 2}
    r.close()
    assert [(e.kind, e.step) for e in _events(r.store_url, r.job_name)] == [(Kind.STEP_START, 4)]


def test_numbers_beyond_a_float_and_times_beyond_the_clock_never_raise() -> None:
    """Huge ints (no float holds them) and datetimes the platform clock cannot convert are
    misuse like any bad value: warned once per kind, recorded at the current time or dropped."""
    r = _recorder(f"memory://huge-{next(_ids)}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r.record_job_start_time(dt.datetime(1, 1, 1))  # naive year 1: timestamp() fails in local time
        r.record_step_start_time(1, 10**400)  # type: ignore[arg-type]
        r.record_step_end_time(1, dt.datetime(1, 1, 1))
        r.record_step_flops(10**400)
        r.record_peak_flops(10**400)
        r.record_job_submit_time(10**400)
        r.record_peak_flops(1e12, source="s" * 200_000)
    counts = r.misuse_counts
    assert counts == {"bad_time": 4, "bad_flops": 1, "bad_flops_per_s": 1, "unrecordable": 1}, counts
    assert all(issubclass(w.category, mlgoodput.MlGoodputWarning) for w in caught)
    r.close()
    assert [e.kind for e in _events(r.store_url, r.job_name)] == [Kind.JOB_START, Kind.STEP_START, Kind.STEP_END]


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_a_value_that_cannot_be_shown_is_still_only_warned() -> None:
    """The warning's own text never raises: a failing __repr__, an int too long to print."""
    r = _recorder(f"memory://unshown-{next(_ids)}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r.record_step_start_time(_Unprintable())  # type: ignore[arg-type]
        r.record_job_start_time(10**5000)  # type: ignore[arg-type]
    texts = [str(w.message) for w in caught]
    assert "step=<_Unprintable that cannot be shown>" in texts[0]
    assert "start_time=<int that cannot be shown>" in texts[1]
    assert r.misuse_counts == {"bad_step": 1, "bad_time": 1}
    r.close()


def test_a_productivity_call_after_close_is_misuse() -> None:
    r = _recorder(f"memory://closed-flops-{next(_ids)}")
    r.close()
    with pytest.warns(mlgoodput.MlGoodputWarning, match=r"record_step_flops.*closed"):
        r.record_step_flops(1e9)
    assert r.misuse_counts == {"closed": 1}


def test_unix_seconds_are_a_time() -> None:
    r = _recorder("memory://unix-seconds")
    r.record_job_start_time(1_700_000_000.0)  # type: ignore[arg-type]
    r.close()
    assert [e.time for e in _events(r.store_url, r.job_name)] == [1_700_000_000.0]


@pytest.mark.parametrize("name", ["", "   ", None])
def test_an_empty_custom_event_type_is_recorded_as_unknown(name: object) -> None:
    r = _recorder(f"memory://bad-name-{len(str(name))}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r.record_custom_badput_event_start_time(at(1), custom_badput_event_type=name)  # type: ignore[arg-type]
        r.record_custom_badput_event_end_time(at(2), custom_badput_event_type=name)  # type: ignore[arg-type]
    assert [str(w.message) for w in caught] == [
        f"Recorder.record_custom_badput_event_start_time(custom_badput_event_type={name!r}):"
        " not a non-empty string; recorded as 'unknown' (misuse kind 'bad_name'; warned once per kind)"
    ]
    assert r.misuse_counts == {"bad_name": 2}
    r.close()
    assert [e.name for e in _events(r.store_url, r.job_name)] == ["unknown", "unknown"]


def test_a_call_after_close_is_dropped() -> None:
    url = "memory://misuse-closed"
    r = _recorder(url)
    r.record_job_start_time(at(0))
    r.close()
    with pytest.warns(mlgoodput.MlGoodputWarning, match="closed"):
        r.record_step_start_time(1, at(1))
    r.record_job_end_time(at(2))
    assert r.misuse_counts == {"closed": 2}
    assert [e.kind for e in _events(url, "misuse-closed")] == [Kind.JOB_START]


def test_elastic_misuse() -> None:
    url = "memory://misuse-elastic"
    r = _recorder(url, ElasticGoodputRecorder)
    assert isinstance(r, ElasticGoodputRecorder)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r.record_elastic_wait_start_time("scale_sideways", at(1))
        r.record_elastic_slice_counts(5, 4, 4, at(2))
        r.record_elastic_slice_counts(0, 0, 0, at(2))
        r.record_elastic_slice_counts(1, 4, -1, at(2))
        r.record_elastic_reinit_end_time(at(3))
        r.record_elastic_wait_end_time("slice_down", at(4))
    texts = [str(w.message) for w in caught]
    assert len(texts) == 3
    assert "event_type='scale_sideways'" in texts[0]
    assert "active_slices=5" in texts[1]
    assert "record_elastic_reinit_end_time" in texts[2]
    assert r.misuse_counts == {"bad_event_type": 1, "bad_slice_counts": 3, "end_without_start": 2}
    r.close()
    assert [e.kind for e in _events(url, "misuse-elastic")] == [Kind.ELASTIC_REINIT_END, Kind.ELASTIC_WAIT_END]


# -- strict mode -------------------------------------------------------------------------
STRICT_CASES: list[tuple[str, Misuse]] = [
    ("end_without_start", lambda r: r.record_job_end_time(at(1))),
    ("bad_step", lambda r: r.record_step_start_time(-1)),
    ("bad_time", lambda r: r.record_job_start_time("now")),  # type: ignore[arg-type]
    ("bad_name", lambda r: r.record_custom_badput_event_start_time(custom_badput_event_type="")),
    ("step_end", lambda r: r.record_step_end_time(3)),
    ("bad_flops", lambda r: r.record_step_flops("many")),  # type: ignore[arg-type]
    ("bad_submit_time", lambda r: r.record_job_submit_time("yesterday")),  # type: ignore[arg-type]
    ("huge_flops", lambda r: r.record_step_flops(10**400)),
]


@pytest.mark.parametrize(("kind", "misuse"), STRICT_CASES, ids=[c[0] for c in STRICT_CASES])
def test_strict_argument_raises(kind: str, misuse: Misuse) -> None:
    r = _recorder(f"memory://strict-{kind}", strict=True)
    with pytest.raises(mlgoodput.MlGoodputMisuseError, match="strict mode"):
        misuse(r)
    with pytest.raises(ValueError):  # a ValueError, so tests catching that keep working
        misuse(r)
    r.close()


def test_strict_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLGOODPUT_STRICT", "1")
    r = _recorder("memory://strict-env")
    assert r.strict
    with pytest.raises(mlgoodput.MlGoodputMisuseError, match="record_data_loading_end_time"):
        r.record_data_loading_end_time()
    r.close()
    assert not _recorder("memory://strict-env-off", strict=False).strict
    monkeypatch.setenv("MLGOODPUT_STRICT", "0")
    assert not _recorder("memory://strict-env-zero").strict


def test_configuration_still_fails_fast() -> None:
    with pytest.raises(TypeError, match="strict"):
        _recorder("memory://cfg", strict="yes")
    with pytest.raises(ValueError, match="background_max_latency_s"):
        _recorder("memory://cfg", background_max_latency_s=0)
    with pytest.raises(TypeError, match="background_batch_size"):
        _recorder("memory://cfg", background_batch_size=1.5)
    with pytest.raises(ValueError, match="cloud_logger or store"):
        Rec("j", "l", True, object(), store="memory://cfg")


def test_disabled_recorder_checks_nothing() -> None:
    """As in the seed: with logging off every call returns at once, whatever its arguments."""
    r = Rec("off", "goodput_off", False, store="memory://off", strict=True)
    r.record_job_end_time()
    r.record_step_start_time(-5)  # type: ignore[arg-type]
    assert r.misuse_counts == {}


class _RaisingTZ(dt.tzinfo):
    """A tzinfo whose every answer raises (a user's broken time zone class)."""

    def utcoffset(self, d: dt.datetime | None) -> dt.timedelta:
        raise RuntimeError("no offset")

    def dst(self, d: dt.datetime | None) -> dt.timedelta:
        raise RuntimeError("no dst")


class _RaisingStr:
    """A value whose str() and repr() raise."""

    def __str__(self) -> str:
        raise RuntimeError("no str")

    def __repr__(self) -> str:
        raise RuntimeError("no repr")


_BAD_TZ = dt.datetime(2026, 1, 1, tzinfo=_RaisingTZ())


def _exotic_calls() -> list[tuple[str, Callable[[Rec], object]]]:
    np = pytest.importorskip("numpy")
    return [
        ("step start, tzinfo raises", lambda r: r.record_step_start_time(1, _BAD_TZ)),
        ("job start, tzinfo raises", lambda r: r.record_job_start_time(_BAD_TZ)),
        ("custom start, tzinfo raises", lambda r: r.record_custom_badput_event_start_time(_BAD_TZ, "eval")),
        ("checkpoint end, tzinfo raises", lambda r: r.record_checkpoint_save_end_time(_BAD_TZ)),
        ("submit, tzinfo raises", lambda r: r.record_job_submit_time(_BAD_TZ)),
        ("submit, repr raises", lambda r: r.record_job_submit_time(_RaisingStr())),  # type: ignore[arg-type]
        ("flush('x')", lambda r: r.flush("x")),  # type: ignore[arg-type]
        ("flush(array)", lambda r: r.flush(np.array([1.0, 2.0]))),
        ("step time as an array", lambda r: r.record_step_start_time(2, np.array([1.0, 2.0]))),  # type: ignore[arg-type]
        ("step as an array", lambda r: r.record_step_start_time(np.array([1, 2]))),
        ("step flops, float and repr raise", lambda r: r.record_step_flops(_RaisingStr())),  # type: ignore[arg-type]
        ("close('x')", lambda r: r.close("x")),  # type: ignore[arg-type]
    ]


@pytest.mark.parametrize("i", range(12))
def test_exotic_arguments_on_the_hot_path_never_raise(i: int) -> None:
    """A tzinfo whose utcoffset raises, a timeout that is not a number, numpy arrays as times,
    values whose str() raises: recorded as well as can be, warned, never raised."""
    what, call = _exotic_calls()[i]
    url = f"memory://exotic-{i}"
    r = _recorder(url)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call(r)  # no exception
    assert any(issubclass(w.category, mlgoodput.MlGoodputWarning) for w in caught), what
    r.close()


def test_exotic_metric_labels_and_flags_never_raise(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    np = pytest.importorskip("numpy")
    from mlgoodput.diagnostics import machinelearning_run, metric_types, metrics

    monkeypatch.setenv("MLGOODPUT_STORE", f"{tmp_path}/m.db")
    monkeypatch.setenv("MLGOODPUT_PROFILE_DIR", f"{tmp_path}/p")
    run = machinelearning_run(name="exotic")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            metrics.record(metric_types.MetricType.LOSS, 1.0, step=1, labels={"k": _RaisingStr()})  # type: ignore[dict-item]
            metrics.record(metric_types.MetricType.LOSS, 2.0, step=2, record_on_all_hosts=np.array([True, False]))
        assert sum(issubclass(w.category, mlgoodput.MlGoodputWarning) for w in caught) == 2
        assert run.flush(30)
        from mlgoodput.diagnostics import load_run

        assert [v for _, v, _ in load_run(run.name).metrics["loss"]] == [1.0, 2.0]  # both values kept
    finally:
        run.end()
