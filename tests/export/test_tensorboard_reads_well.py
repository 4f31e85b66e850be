"""TensorBoard output a person can read: few JAX charts, a layout, monotonic steps across
writers, one writer per folder for monitors, and the profile plugin installed."""

from __future__ import annotations

import math
import struct
from importlib import metadata
from pathlib import Path

import pytest

from mlgoodput.export import Sample, TensorBoardExporter

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def _acc(d: Path) -> EventAccumulator:
    acc = EventAccumulator(str(d))
    acc.Reload()
    return acc


def _jax(fun: str, count: float, total: float, mx: float) -> list[Sample]:
    labels = {"job_name": "j", "host": "0", "fun_name": fun}
    n = "jax/core/compile/backend_compile_duration"
    return [
        Sample(n + "/count", count, labels, "counter"),
        Sample(n + "/sum", total, labels, "counter"),
        Sample(n + "/max", mx, labels),
        Sample(n + "/min", mx / 2, labels),
        Sample(n + "/last", mx, labels),
        Sample(n + "/bucket", count, {**labels, "le": "+Inf"}, "counter"),
    ]


def test_jax_tags_are_summed_over_functions_and_laid_out(tmp_path: Path) -> None:
    exp = TensorBoardExporter(tmp_path / "jax")
    samples = [s for i in range(40) for s in _jax(f"jit(f{i})", 1, 0.5, 0.1 * (i + 1))]
    exp.export(samples)
    exp.shutdown()
    acc = _acc(tmp_path / "jax")
    tags = sorted(acc.Tags()["scalars"])
    base = "jax/core/compile/backend_compile_duration"
    assert tags == [f"{base}/count/host=0", f"{base}/max/host=0", f"{base}/sum/host=0"]  # not 240 tags
    assert acc.Scalars(f"{base}/count/host=0")[-1].value == 40
    assert acc.Scalars(f"{base}/sum/host=0")[-1].value == pytest.approx(20.0)
    assert acc.Scalars(f"{base}/max/host=0")[-1].value == pytest.approx(4.0)
    assert "custom_scalars__config__" in acc.Tags()["tensors"]


def test_steps_continue_across_processes(tmp_path: Path) -> None:
    """A second writer (a restarted attempt) continues the step axis instead of restarting it,
    and an explicit step that goes back (a restored job) never moves a tag backwards."""
    d = tmp_path / "tb"
    first = TensorBoardExporter(d)
    for _ in range(3):
        first.export([*_jax("jit(f)", 1, 1, 1), Sample("goodput/last_step", 25, {"job_name": "j"}, step=25)])
    first.shutdown()
    second = TensorBoardExporter(d)
    for _ in range(2):
        second.export([*_jax("jit(f)", 2, 2, 1), Sample("goodput/last_step", 20, {"job_name": "j"}, step=20)])
    second.shutdown()
    assert len(list(d.glob("events.out.tfevents.*"))) == 2
    acc = _acc(d)
    steps = [e.step for e in acc.Scalars("jax/core/compile/backend_compile_duration/count/host=0")]
    assert steps == [1, 2, 3, 4, 5]
    assert [e.step for e in acc.Scalars("goodput/last_step")] == [25, 25, 25, 25, 25]


def test_a_second_monitor_on_one_folder_is_refused(tmp_path: Path) -> None:
    a = TensorBoardExporter(tmp_path / "goodput", exclusive=True)
    a.start()
    b = TensorBoardExporter(tmp_path / "goodput", exclusive=True, lock_wait_s=0.3)
    try:
        with pytest.raises(ValueError, match="another mlgoodput process"):
            b.start()
    finally:
        a.shutdown()
    b.start()  # free once the first has stopped
    b.shutdown()


def test_profile_plugin_is_installed_with_the_diagnostics_extra() -> None:
    requires = metadata.requires("mlgoodput") or []
    assert any(r.startswith("tensorboard-plugin-profile") and 'extra == "diagnostics"' in r for r in requires)
    plugins = {ep.name for ep in metadata.entry_points(group="tensorboard_plugins")}
    assert "profile" in plugins


def test_tags_follow_the_labels_of_each_upload(tmp_path: Path) -> None:
    """The exporter names a series once and reuses the name: a label whose value changes is
    another series (its own tag), and a name missing a label still fails on every upload."""
    exp = TensorBoardExporter(tmp_path / "tb")
    for i in range(3):
        exp.export(
            [
                Sample("stragglers/held_back_seconds", float(i), {"job_name": "j", "rank": str(r)}, step=i)
                for r in range(2 + i)
            ]
        )
    for _ in range(2):
        with pytest.raises(ValueError, match="needs labels"):
            exp.export([Sample("badput/{bucket}_seconds", 1.0, {"job_name": "j"})])
    exp.shutdown()
    acc = _acc(tmp_path / "tb")
    tags = sorted(t for t in acc.Tags()["scalars"] if t.startswith("stragglers/"))
    assert tags == [f"stragglers/held_back_seconds/rank={r}" for r in range(4)]
    assert [e.value for e in acc.Scalars("stragglers/held_back_seconds/rank=1")] == [0.0, 1.0, 2.0]
    assert [e.value for e in acc.Scalars("stragglers/held_back_seconds/rank=3")] == [2.0]


def test_scalar_events_are_encoded_byte_for_byte_as_protobuf_does(tmp_path: Path) -> None:
    """The exporter encodes its scalar events itself (a cached prefix per tag): the same bytes
    as tensorboardX's protobuf classes, or a fallback to them for what they treat apart."""
    import random

    from tensorboardX.proto import event_pb2, summary_pb2
    from tensorboardX.record_writer import RecordWriter

    from mlgoodput.export._tensorboard import _event, _head, _prefix, _scalar_event, _write_records

    rng = random.Random(7)
    tags = ["goodput/goodput_pct", "hosts/3/step_time_p90_seconds", "é/" + "x" * 200, "a" * 5000]
    values = [0.0, -0.0, 1.0, -2.5, 1e-45, 3.4e38, 3.5e38, 1e300, float("nan"), float("inf"), 1 / 3]
    steps = [0, 1, 127, 128, 16384, 2**40, 2**63 - 1]
    walls = [0.0, 1.5, 1.7e9 + rng.random(), -3.0]
    heads: dict[str, bytes] = {}
    encoded = fallback = 0
    for tag in tags:
        for v in values + [rng.uniform(-1e6, 1e6) for _ in range(5)]:
            for step in steps:
                for wall in walls:
                    got = _scalar_event(heads, tag, wall, step, v)
                    if got is None:
                        fallback += 1
                        continue
                    encoded += 1
                    value = summary_pb2.Summary.Value(tag=tag, simple_value=v)
                    ev = event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=[value]))
                    assert got == ev.SerializeToString(), (tag, v, step, wall)
    assert encoded > 500 and fallback > 100
    # several values to an event, as the exporter writes them
    pre = _prefix(1.7e9 + 0.5, 300)
    assert pre is not None
    got = _event(pre, [_head(t) + struct.pack("<f", v) for t, v in zip(tags, values[:4], strict=True)])
    pbs = [summary_pb2.Summary.Value(tag=t, simple_value=v) for t, v in zip(tags, values[:4], strict=True)]
    assert (
        got
        == event_pb2.Event(wall_time=1.7e9 + 0.5, step=300, summary=summary_pb2.Summary(value=pbs)).SerializeToString()
    )
    # the framing: what RecordWriter.write gives, record by record
    records = [_scalar_event(heads, t, 1.7e9, 5, 0.25) or b"" for t in tags]
    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    w = RecordWriter(str(mine))
    _write_records(w, records)
    w.close()
    w = RecordWriter(str(theirs))
    for r in records:
        w.write(r)
    w.close()
    assert mine.read_bytes() == theirs.read_bytes()


def test_an_upload_is_a_few_events_of_many_values_and_reads_the_same(tmp_path: Path) -> None:
    """Samples in a row with one wall time and step share an event (at most _EVENT_VALUES
    values each, one framing and checksum for all of them); a value protobuf writes apart (a
    NaN) gets an event of its own; TensorBoard reads every point."""
    from mlgoodput.export._tb_layout import _records
    from mlgoodput.export._tensorboard import _EVENT_VALUES

    exp = TensorBoardExporter(tmp_path / "tb")
    n = _EVENT_VALUES + 100
    samples = [Sample("hosts/step_time_seconds", float(i), {"job_name": "j", "host": str(i)}) for i in range(n)]
    samples = [Sample(s.name, s.value, s.labels, step=7, time=1.7e9 + 1) for s in samples]
    samples.insert(3, Sample("goodput/goodput_pct", float("nan"), {"job_name": "j"}, step=7, time=1.7e9 + 1))
    samples.append(Sample("goodput/goodput_pct", 50.0, {"job_name": "j"}, step=8, time=1.7e9 + 2))
    exp.export(samples)
    exp.shutdown()
    (f,) = (tmp_path / "tb").glob("events.out.tfevents.*")
    from tensorboardX.proto import event_pb2

    sizes = []
    for data in _records(str(f)):
        ev = event_pb2.Event()
        ev.ParseFromString(data)
        if ev.HasField("summary") and ev.step:
            sizes.append((ev.step, len(ev.summary.value)))
    # 3 values, the NaN alone, the rest of step 7 in events of at most _EVENT_VALUES, step 8
    assert sizes == [(7, 3), (7, 1), (7, _EVENT_VALUES), (7, n - 3 - _EVENT_VALUES), (8, 1)]
    acc = _acc(tmp_path / "tb")
    for i in (0, 3, 511, n - 1):
        (point,) = acc.Scalars(f"hosts/step_time_seconds/host={i}")
        assert (point.step, point.value, point.wall_time) == (7, float(i), 1.7e9 + 1)
    points = acc.Scalars("goodput/goodput_pct")
    assert [p.step for p in points] == [7, 8] and math.isnan(points[0].value) and points[1].value == 50.0
