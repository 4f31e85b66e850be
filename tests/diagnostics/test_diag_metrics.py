"""metrics.record: names and types, bad input, and values reaching the store and exporters."""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from mlgoodput._misuse import MlGoodputWarning
from mlgoodput.diagnostics import (
    RecordingError,
    load_run,
    machinelearning_run,
    metric_types,
    metrics,
    xprof,
)
from mlgoodput.diagnostics.metric_types import MetricType
from mlgoodput.export import ExporterProcess, TensorBoardExporter
from mlgoodput.testing import FileExporter


def test_predefined_types_user_names_steps_and_time_axis() -> None:
    run = machinelearning_run(name="m")
    for step in range(1, 4):
        for mt in MetricType:
            metrics.record(mt, float(step), step=step)
    metrics.record("tokens_per_s", 1000)
    metrics.record(metric_types.MetricType.LOSS, [1.0, 2.0, 6.0], step=4)  # averaged
    metrics.record("np", np.float32(0.5), step=np.int64(5))
    metrics.record("arr", np.array([1.0, 3.0]))
    run.end()
    got = load_run(run.name)
    assert set(got.metrics) == {m.value for m in MetricType} | {"tokens_per_s", "np", "arr"}
    assert [p[:2] for p in got.metrics["learning_rate"]] == [(1, 1.0), (2, 2.0), (3, 3.0)]
    assert got.metrics["loss"][-1][:2] == (4, 3.0)
    assert got.metrics["tokens_per_s"][0][0] is None  # time axis
    assert got.metrics["np"][0][:2] == (5, 0.5)
    assert got.metrics["arr"][0][1] == 2.0
    t = [p[2] for p in got.metrics["mfu"]]
    assert t == sorted(t) and abs(t[0] - got.starts[0]["time"]) < 60


def test_nan_is_kept() -> None:
    run = machinelearning_run(name="nan")
    metrics.record("loss", float("nan"), step=1)
    run.end()
    assert math.isnan(load_run(run.name).metrics["loss"][0][1])


@pytest.mark.parametrize(
    ("args", "words", "kept"),
    [
        ((3, 1.0), "metric_name=3", None),
        ((["loss"], 1.0), "metric_name=['loss']", None),
        (("", 1.0), "metric_name=''", None),
        (("loss", None), "no value", None),
        (("loss", []), "empty list", None),
        (("loss", [1.0, "x"]), "numbers only", None),
        (("loss", object()), "must be a number", None),
        (("loss", 1.0, -1), "step=-1", (None, 1.0)),  # kept on the time axis
        (("loss", 1.0, 1.5), "step=1.5", (None, 1.0)),
        (("loss", 10**400), "too large for a float", None),
        (("loss", [1.0, 10**400]), "numbers only", None),
        (("loss", 1.0, 2**70), "cannot be journaled", None),  # a step beyond 64 bits
        (("loss", "text", 2**70), "cannot be journaled", None),
        (("x" * 70_000, 1.0), "cannot be journaled", None),  # a name beyond the journal's limit
    ],
)
def test_bad_input_warns_once_and_records_what_it_can(
    args: tuple[object, ...], words: str, kept: tuple[object, float] | None
) -> None:
    run = machinelearning_run(name="bad")
    with pytest.warns(MlGoodputWarning, match=re.escape(words)):
        metrics.record(*args)  # type: ignore[arg-type]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second time: no warning (once per kind)
        metrics.record(*args)  # type: ignore[arg-type]
    run.end()
    got = load_run(run.name).metrics.get("loss", [])
    assert [p[:2] for p in got] == ([] if kept is None else [kept, kept])


def test_bad_labels_and_batches_warn_and_record_the_rest() -> None:
    run = machinelearning_run(name="batchbad")
    with pytest.warns(MlGoodputWarning, match="labels"):
        metrics.record("loss", 1.0, step=1, labels="phase=warmup")  # type: ignore[arg-type]
    with pytest.warns(MlGoodputWarning, match="metrics_data"):
        metrics.record_metrics({"metric_name": "loss", "value": 9.0})  # type: ignore[arg-type]
    with pytest.warns(MlGoodputWarning, match="each item"):
        metrics.record_metrics([("loss", 9.0), {"metric_name": "loss", "value": 2.0, "step": 2}])  # type: ignore[list-item]
    run.end()
    got = load_run(run.name)
    assert [p[:2] for p in got.metrics["loss"]] == [(1, 1.0), (2, 2.0)]
    assert "loss" not in got.labels


def test_values_held_before_a_run_are_bounded() -> None:
    with pytest.warns(MlGoodputWarning, match="no active run"):
        for i in range(metrics.PENDING_MAX):
            metrics.record("loss", float(i), step=i)
    with pytest.warns(MlGoodputWarning, match="oldest are dropped"):
        metrics.record("loss", -1.0, step=metrics.PENDING_MAX)
    run = machinelearning_run(name="bounded")
    run.end()
    got = load_run(run.name).metrics["loss"]
    assert len(got) == metrics.PENDING_MAX and got[0][:2] == (1, 1.0) and got[-1][1] == -1.0


def test_a_held_value_the_journal_cannot_hold_is_skipped_when_the_run_starts() -> None:
    with pytest.warns(MlGoodputWarning, match="no active run"):
        metrics.record("loss", 1.0, step=2**70)
        metrics.record("loss", 2.0, step=3)
    with pytest.warns(MlGoodputWarning, match="cannot be journaled"):
        run = machinelearning_run(name="heldhuge")
    run.end()
    assert [p[:2] for p in load_run(run.name).metrics["loss"]] == [(3, 2.0)]


def test_bools_are_numbers_as_in_the_sdk() -> None:
    run = machinelearning_run(name="bools")
    metrics.record("flag", True, step=1)
    run.end()
    assert load_run(run.name).metrics["flag"][0][:2] == (1, 1.0)


def test_strict_mode_raises_recording_error(monkeypatch: pytest.MonkeyPatch) -> None:
    machinelearning_run(name="strict")
    monkeypatch.setenv("MLGOODPUT_STRICT", "1")
    with pytest.raises(RecordingError, match="step"):
        metrics.record("loss", 1.0, step=-1)
    with pytest.raises(ValueError, match="metric_name"):  # RecordingError is a ValueError, as in the SDK
        metrics.record(3, 1.0)  # type: ignore[arg-type]


def test_strict_mode_as_a_run_argument(monkeypatch: pytest.MonkeyPatch) -> None:
    run = machinelearning_run(name="strictarg", strict=True)
    with pytest.raises(RecordingError, match="value"):
        metrics.record("loss", None)
    with pytest.raises(ValueError, match="nothing to stop"):
        xprof().stop()
    run.end()
    monkeypatch.setenv("MLGOODPUT_STRICT", "1")
    machinelearning_run(name="notstrict", strict=False)  # the argument wins over the environment
    with pytest.warns(MlGoodputWarning, match="value"):
        metrics.record("loss", None)
    with pytest.raises(TypeError, match="strict"):
        machinelearning_run(name="bad", strict="yes")  # type: ignore[arg-type]


def test_record_without_a_run_keeps_values_for_the_next_run() -> None:
    with pytest.warns(MlGoodputWarning, match="no active run"):
        metrics.record("loss", 1.0, step=1)
    metrics.record("loss", 2.0, step=2, labels={"phase": "warmup"})
    run = machinelearning_run(name="late")
    metrics.record("loss", 3.0, step=3)
    run.end()
    assert [p[:2] for p in load_run(run.name).metrics["loss"]] == [(1, 1.0), (2, 2.0), (3, 3.0)]


def test_record_metrics_labels_and_text_values() -> None:
    run = machinelearning_run(name="batch")
    metrics.record_metrics(
        [
            {"metric_name": MetricType.TFLOPS, "value": 123.5},
            {"metric_name": "custom", "value": 5.0, "step": 9, "labels": {"k": "v"}},
            {"metric_name": "note", "value": {"text": "hello"}},
        ],
        step=4,
    )
    run.end()
    got = load_run(run.name)
    assert got.metrics["tflops"][0][:2] == (4, 123.5)
    assert got.metrics["custom"][0][:2] == (9, 5.0)
    assert got.entries[0]["namespace"] == "note" and got.entries[0]["body"] == {"text": "hello"}
    assert got.entries[0]["step"] == 4
    assert got.labels["custom"] == {"k": "v"}


def test_only_process_zero_records_unless_all_hosts() -> None:
    run = machinelearning_run(name="hosts", process_index=1)
    metrics.record("loss", 1.0, step=1)  # dropped on process 1, as in the SDK
    metrics.record("loss", 2.0, step=2, record_on_all_hosts=True)
    run.end()
    assert [p[:2] for p in load_run(run.name).metrics["loss"]] == [(2, 2.0)]


def test_values_reach_an_exporter_through_the_exporter_process(tmp_path: Path) -> None:
    out = tmp_path / "exported.jsonl"
    run = machinelearning_run(name="exp", exporters=[FileExporter(out)])
    metrics.record(MetricType.LOSS, 0.25, step=7)
    metrics.record("accuracy", 0.9, step=7)
    metrics.record("accuracy", 0.8, step=7, labels={"split": "eval"})
    assert run.flush(30.0)
    latest = FileExporter.latest(out)
    key = f"|host=0,run={run.name}"
    assert latest["metrics/loss" + key] == 0.25
    assert latest["metrics/accuracy" + key] == 0.9
    assert latest[f"metrics/accuracy|host=0,run={run.name},split=eval"] == 0.8  # labels reach the sample
    rows = [s for r in FileExporter.read(out) for s in r.get("samples", [])]  # type: ignore[attr-defined]
    assert {r["step"] for r in rows if r["name"] == "metrics/loss"} == {7}
    run.end()
    assert any(r.get("shutdown") for r in FileExporter.read(out))  # our exporter process was stopped
    assert load_run(run.name).metrics["loss"][0][:2] == (7, 0.25)  # and the store has it too


@pytest.mark.slow
def test_values_become_tensorboard_scalars(tmp_path: Path) -> None:
    logdir = tmp_path / "tb"
    proc = ExporterProcess([TensorBoardExporter(logdir)], interval_s=0.2)
    proc.start()
    try:
        run = machinelearning_run(name="tb", exporters=proc)  # a shared process the caller owns
        metrics.record(MetricType.LOSS, 0.5, step=3)
        assert run.flush(30.0)
        run.end()
        assert proc.alive  # not ours to stop
    finally:
        proc.stop(10.0)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    files = list(logdir.rglob("events.out.tfevents.*"))
    assert files
    acc = EventAccumulator(str(files[0].parent))
    acc.Reload()
    tags = [t for t in acc.Tags()["scalars"] if "loss" in t]
    assert tags, acc.Tags()
    ev = acc.Scalars(tags[0])
    assert ev[-1].step == 3 and ev[-1].value == pytest.approx(0.5)


@pytest.mark.slow
def test_a_failing_exporter_never_reaches_the_training_loop(tmp_path: Path) -> None:
    flag = tmp_path / "down"
    flag.write_text("")
    out = tmp_path / "x.jsonl"
    run = machinelearning_run(name="down", exporters=[FileExporter(out, fail_flag=str(flag))])
    for i in range(100):
        metrics.record("loss", float(i), step=i)  # no exception while the backend is down
    assert not run.flush(1.0)
    flag.unlink()
    assert run.flush(30.0)
    assert FileExporter.latest(out)[f"metrics/loss|host=0,run={run.name}"] == 99.0
    run.end()
    assert len(load_run(run.name).metrics["loss"]) == 100


@pytest.mark.slow
def test_a_broken_store_never_reaches_the_training_loop(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    run = machinelearning_run(name="nostore", store=str(blocker / "store.db"))
    for i in range(1000):
        metrics.record(MetricType.LOSS, 1.0, step=i)  # the store cannot even be created
    assert not run.flush(0.5)
    run.end(timeout_s=2.0)
    # nothing is lost: once the store can be written, the journal's leftovers are shipped
    blocker.unlink()
    blocker.mkdir(exist_ok=True)  # a shipper still retrying may make the folder first
    from mlgoodput._recovery import recover_journals

    recover_journals(str(blocker / "store.db"))
    got = load_run(run.name, store=str(blocker / "store.db"))
    assert [p[0] for p in got.metrics["loss"]] == list(range(1000))
