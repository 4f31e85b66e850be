"""The monitor's fast sample path (shared SeriesLabels, samples built without Sample.__init__,
what each export stage derives from a series computed once) gives exactly what the plain path
gives: the same samples, the same TensorBoard bytes, the same Prometheus text, upload after
upload (hosts appearing and leaving, steps going back, odd characters in labels)."""

from __future__ import annotations

import dataclasses
import pickle
import struct
import time
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from plain_samples import cumulative_samples as plain_cumulative
from plain_samples import step_deviation_sample as plain_deviation
from plain_samples import straggler_samples as plain_stragglers

from mlgoodput._monitoring._samples import cumulative_samples, step_deviation_sample
from mlgoodput._monitoring._straggler_samples import straggler_samples
from mlgoodput.accounting import BadputType, GoodputCalculator, HostStepStats, SliceEfficiency
from mlgoodput.events import EventBatch
from mlgoodput.export import PrometheusExporter, Sample, SeriesLabels, TensorBoardExporter, new_sample
from mlgoodput.export import _tensorboard as tb_module
from mlgoodput.export._names import tensorboard_tag
from mlgoodput.export._process import latest_by_series, series_key
from mlgoodput.store import MemoryStore
from timelines import all_timelines, load

ODD = 'é "q"/x=1\\ \n'  # quotes, a slash, '=', a backslash, a newline, non-ASCII


def _base_report() -> Any:
    tl = load(next(p for p in all_timelines() if p.stem.startswith("p1_")))
    store = MemoryStore()
    store.append(f"goodput_{tl.job_name}", tl.job_name, EventBatch(1, 0, tl.events))
    return GoodputCalculator(tl.job_name, f"goodput_{tl.job_name}", store=store, clock=lambda: tl.query).report()


def _hosts(ids: Sequence[int], k: float) -> tuple[HostStepStats, ...]:
    return tuple(HostStepStats(h, 10 + h, 0.1 * k + h, 0.2 * k + h, 0.3 * k + 2 * h) for h in ids)


def _lag(ranks: Sequence[int], k: float, straggler: int | None) -> Any:
    return types.SimpleNamespace(
        straggler=straggler,
        straggler_cost_s=1.5 * k,
        ranks=[
            types.SimpleNamespace(rank=r, held_back_s=k * r, median_step_s=0.1 + r, mean_lag_s=k / (r + 1))
            for r in ranks
        ],
    )


def _uploads() -> list[tuple[Any, Any, dict[str, Any]]]:
    """(report, straggler report, cumulative options) of successive uploads."""
    r = _base_report()
    custom = {BadputType.CUSTOM_BADPUT_EVENTS: {"ckpt": 2.0, ODD: 1.0}}
    r = dataclasses.replace(r, badput_s={**r.badput_s, **custom}, slice_efficiency=SliceEfficiency(0.5, 0.75))
    odd_job = dataclasses.replace(r, job_name=f"job {ODD}", logger_name="log/x")
    opts = {"include_slice_efficiency": True}
    return [
        (dataclasses.replace(r, hosts=_hosts([0, 1, 2], 1.0), last_step=10), _lag([0, 1, 2], 1.0, 2), opts),
        # two hosts appear, the values change
        (dataclasses.replace(r, hosts=_hosts([0, 1, 2, 3, 4], 2.0), last_step=20), _lag(range(5), 2.0, None), opts),
        # nothing new
        (dataclasses.replace(r, hosts=_hosts([0, 1, 2, 3, 4], 2.0), last_step=20), _lag(range(5), 2.0, None), opts),
        # a host leaves, the step goes back
        (dataclasses.replace(r, hosts=_hosts([0, 1, 2, 4], 3.0), last_step=19), _lag([0, 1, 2, 4], 3.0, 4), opts),
        # no step yet, no breakdown
        (
            dataclasses.replace(r, hosts=_hosts([0, 7], 4.0), last_step=None),
            _lag([0, 7], 4.0, 0),
            {"include_badput_breakdown": False},
        ),
        # another job (odd names) through the same exporters
        (dataclasses.replace(odd_job, hosts=_hosts([0, 1], 5.0), last_step=30), _lag([0, 1], 5.0, 1), opts),
        (dataclasses.replace(r, hosts=_hosts([0, 1, 2, 3, 4, 5], 6.0), last_step=40), _lag(range(6), 6.0, 5), opts),
    ]


def _both(report: Any, lag: Any, opts: dict[str, Any]) -> tuple[list[Sample], list[Sample]]:
    fast = cumulative_samples(report, **opts) + straggler_samples(report, lag)
    fast.append(step_deviation_sample(report, 0.25))
    plain = plain_cumulative(report, **opts) + plain_stragglers(report, lag)
    plain.append(plain_deviation(report, 0.25))
    return fast, plain


def _jax(k: float) -> list[Sample]:
    """JAX samples (TensorBoard sums them over their per-function labels), some with SeriesLabels."""
    base = "jax/core/compile/backend_compile_duration"
    out = []
    for i, fun in enumerate(("f", "g", ODD)):
        labels = {"job_name": "j", "host": "0", "fun_name": fun}
        for part, v in (("count", 1.0 + i), ("sum", k * (i + 1)), ("max", k + i), ("min", 0.1), ("bucket", 1.0)):
            extra = {"le": "+Inf"} if part == "bucket" else {}
            out.append(Sample(f"{base}/{part}", v, {**labels, **extra}, step=int(k), unit="s"))
    out.append(new_sample("jax/other/{host}_x", k, SeriesLabels([("job_name", "j"), ("host", "1")]), "gauge", 3))
    return out


def _fields(s: Sample) -> tuple[Any, ...]:
    return (s.name, s.value, type(s.value), list(s.labels.items()), s.kind, s.step, s.time, s.unit, s.description)


def test_the_samples_are_the_plain_ones() -> None:
    for report, lag, opts in _uploads():
        fast, plain = _both(report, lag, opts)
        assert len(fast) == len(plain) > 20
        assert fast == plain
        assert [_fields(s) for s in fast] == [_fields(s) for s in plain]  # label order and value types too
        assert all(type(s) is Sample for s in fast)
        hosts = [s for s in fast if s.name.startswith("hosts/")]
        assert len(hosts) == 3 * len(report.hosts) and all(type(s.labels) is SeriesLabels for s in hosts)
        assert [series_key(s) for s in fast] == [series_key(s) for s in plain]
        assert list(latest_by_series(fast)) == list(latest_by_series(plain))


def _prom_text(exp: PrometheusExporter) -> bytes:
    from prometheus_client import core, generate_latest

    from mlgoodput.export._prometheus import _Collector

    registry = core.CollectorRegistry(auto_describe=False)
    registry.register(_Collector(exp))
    return bytes(generate_latest(registry))


def test_exporters_write_the_same_with_and_without_shared_labels(tmp_path: Path, monkeypatch: Any) -> None:
    """Upload after upload, a TensorBoard exporter fed the fast samples writes the bytes that
    one fed the same samples with plain dict labels writes, each record what protobuf writes;
    the Prometheus text is the same too."""
    from tensorboardX.proto import event_pb2

    now = [1.7e9 + 0.123]  # the same wall time for both exporters, 10 s more each upload
    fake = types.SimpleNamespace(time=lambda: now[0], monotonic=time.monotonic, sleep=time.sleep)
    monkeypatch.setattr(tb_module, "time", fake)
    tbs = [TensorBoardExporter(tmp_path / "fast"), TensorBoardExporter(tmp_path / "plain")]
    last: dict[str, int] = {}
    want: list[tuple[str, int, float, float]] = []
    proms = [PrometheusExporter(port=0), PrometheusExporter(port=0)]
    try:
        for report, lag, opts in _uploads():
            now[0] += 10.0
            fast, _ = _both(report, lag, opts)
            fast += _jax(now[0] - 1.7e9)
            # the plain twin: the same samples, labels as fresh dicts
            twin = [dataclasses.replace(s, labels=dict(s.labels)) for s in fast]
            assert not any(type(s.labels) is SeriesLabels for s in twin)
            for samples, tb, prom in zip((fast, twin), tbs, proms, strict=True):
                latest = list(latest_by_series(samples).values())
                tb.export(latest)
                prom.export(latest)
            for s in latest:  # what each point must be (docs/exporting.md), JAX ones aside
                tag = tensorboard_tag(s.name, s.labels)
                if not tag.startswith("jax/"):
                    prev = last.get(tag, 0)
                    last[tag] = step = prev + 1 if s.step is None else max(s.step, prev)
                    want.append((tag, step, struct.unpack("<f", struct.pack("<f", s.value))[0], now[0]))
            assert _prom_text(proms[0]) == _prom_text(proms[1])
            got = [sorted((tmp_path / d).glob("events.out.tfevents.*")) for d in ("fast", "plain")]
            assert [len(g) for g in got] == [1, 1]
            assert got[0][0].read_bytes() == got[1][0].read_bytes()
        text = _prom_text(proms[0]).decode()
        assert 'mlgoodput_hosts_step_time_seconds{host="5"' in text and 'job_name="job é \\"q\\"/x=1\\\\ \\n"' in text
    finally:
        for e in (*tbs, *proms):
            e.shutdown()
    data = got[0][0].read_bytes()
    records, at = [], 0
    while at < len(data):
        n = int.from_bytes(data[at : at + 8], "little")
        records.append(data[at + 12 : at + 12 + n])
        at += 12 + n + 4
    points = []
    for rec in records:
        ev = event_pb2.Event()
        ev.ParseFromString(rec)
        assert ev.SerializeToString() == rec  # what protobuf writes for that event
        values = [v for v in ev.summary.value if v.HasField("simple_value")]
        points += [(v.tag, ev.step, v.simple_value, ev.wall_time) for v in values]
    assert [p for p in points if not p[0].startswith("jax/")] == want and len(want) > 300
    tags = {v.tag for rec in records for v in event_pb2.Event.FromString(rec).summary.value}
    assert "jax/core/compile/backend_compile_duration/sum/host=0" in tags and "jax/other/1_x" in tags
    assert "hosts/5/step_time_max_seconds" in tags and 'badput/custom/é "q"_x=1\\ \n_seconds' in tags


def test_series_labels_are_a_dict_that_cannot_change() -> None:
    labels = SeriesLabels([("job_name", "j"), ("host", "3")])
    plain = {"job_name": "j", "host": "3"}
    assert labels == plain and list(labels.items()) == list(plain.items()) and isinstance(labels, dict)
    for change in (
        lambda: labels.__setitem__("x", "1"),
        lambda: labels.__delitem__("host"),
        lambda: labels.update(x="1"),
        lambda: labels.pop("host"),
        lambda: labels.popitem(),
        lambda: labels.setdefault("x", "1"),
        labels.clear,
    ):
        with pytest.raises(TypeError, match="cannot be changed"):
            change()
    with pytest.raises(TypeError):
        labels |= {"x": "1"}
    assert labels == plain
    copied = labels.copy()
    copied["x"] = "1"  # a copy is a plain dict
    assert type(copied) is dict and dict(labels, x="2")["x"] == "2"
    back = pickle.loads(pickle.dumps(labels))
    assert type(back) is dict and back == plain


def test_new_sample_is_sample() -> None:
    labels = SeriesLabels([("job_name", "j"), ("stat", "p90")])
    fast = new_sample("hosts/{stat}_x", 1.5, labels, "counter", 7, 3.0, "s", "d")
    plain = Sample("hosts/{stat}_x", 1.5, {"job_name": "j", "stat": "p90"}, "counter", 7, 3.0, "s", "d")
    assert fast == plain and repr(fast) == repr(plain) and type(fast) is Sample
    assert dataclasses.astuple(fast) == dataclasses.astuple(plain)
    back = pickle.loads(pickle.dumps(fast))
    assert back == plain and type(back.labels) is dict
    assert dataclasses.replace(fast, value=2.0) == dataclasses.replace(plain, value=2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.value = 3.0  # type: ignore[misc]
    for s in (fast, plain):
        with pytest.raises(TypeError):
            hash(s)  # labels are a dict: a sample is not hashable, either way


def test_a_missing_placeholder_fails_the_same_on_both_paths(tmp_path: Path) -> None:
    labels = SeriesLabels([("job_name", "j")])
    plain = Sample("badput/{bucket}_seconds", 1.0, {"job_name": "j"})
    for s in (new_sample("badput/{bucket}_seconds", 1.0, labels), plain):
        tb, prom = TensorBoardExporter(tmp_path / "tb"), PrometheusExporter(port=0)
        try:
            for e in (tb, prom):
                for _ in range(2):  # and again: nothing remembered as checked
                    with pytest.raises(ValueError, match="needs labels"):
                        e.export([s])
        finally:
            tb.shutdown()
            prom.shutdown()


def test_host_samples_of_an_unchanged_report_are_reused_only_when_all_is_the_same() -> None:
    report, _, opts = _uploads()[1]
    first = cumulative_samples(report, **opts)
    again = cumulative_samples(report, **opts)  # nothing new: the calculator hands the same hosts back
    hosts = [i for i, s in enumerate(first) if s.name.startswith("hosts/")]
    assert len(hosts) == 15 and all(first[i] is again[i] for i in hosts)
    assert again == plain_cumulative(report, **opts)
    moved = dataclasses.replace(report, last_step=21)  # the same hosts object, a new step
    got = cumulative_samples(moved, **opts)
    assert got == plain_cumulative(moved, **opts) and {got[i].step for i in hosts} == {21}
    timed = cumulative_samples(report, time=5.0, **opts)  # an explicit time is never taken from the last
    assert timed == plain_cumulative(report, time=5.0, **opts) and {timed[i].time for i in hosts} == {5.0}
    assert cumulative_samples(report, **opts) == plain_cumulative(report, **opts)
    other = dataclasses.replace(report, hosts=_hosts([0, 1, 2, 3, 4], 9.0))  # equal step, new statistics
    assert cumulative_samples(other, **opts) == plain_cumulative(other, **opts)


def _pages(exp: PrometheusExporter) -> tuple[bytes, bytes]:
    """The Prometheus text and OpenMetrics pages of the exporter's current values."""
    from prometheus_client import core, generate_latest
    from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

    from mlgoodput.export._prometheus import _Collector

    registry = core.CollectorRegistry(auto_describe=False)
    registry.register(_Collector(exp))
    return bytes(generate_latest(registry)), bytes(generate_openmetrics(registry))


def test_prometheus_pages_are_the_same_for_shared_labels_whatever_the_samples_say() -> None:
    """A shared-label series whose kind or unit changes, counters, histogram parts, label
    names Prometheus does not take as they are, a label set that does not fit its family:
    the pages are those of the same samples with plain labels."""

    def lab(*kv: str) -> SeriesLabels:
        return SeriesLabels(zip(kv[::2], kv[1::2], strict=True))

    a, b, odd = lab("job_name", "j", "odd-key", ODD), lab("job_name", "j"), lab("job_name", "j", "x", "1")
    h = lab("job_name", "j", "le", "0.5")
    uploads = [
        [
            new_sample("goodput/goodput_pct", 50.0, b),
            new_sample("metrics/{odd-key}/v", 1.0, a, unit="s"),
            new_sample("metrics/steps_total", 3.0, b, kind="counter"),
            new_sample("jax/compile/bucket", 2.0, h, unit="s"),
            new_sample("jax/compile/count", 2.0, b),
            new_sample("jax/compile/sum", 0.7, b),
            new_sample("metrics/v", 1.0, b, description="v"),
        ],
        [
            new_sample("metrics/{odd-key}/v", 2.0, a, unit=""),  # the unit changed
            new_sample("metrics/steps_total", 4.0, b, kind="gauge"),  # the kind changed
            new_sample("metrics/v", 2.0, odd),  # a label set the family does not have: skipped
            new_sample("jax/compile/count", 3.0, b),
        ],
        [new_sample("metrics/{odd-key}/v", 3.0, a, unit="s"), new_sample("goodput/goodput_pct", float("nan"), b)],
    ]
    fast, plain = PrometheusExporter(port=0), PrometheusExporter(port=0)
    try:
        for samples in uploads:
            fast.export(samples)
            plain.export([dataclasses.replace(s, labels=dict(s.labels)) for s in samples])
            assert _pages(fast) == _pages(plain)
        text = _pages(fast)[0].decode()
        assert 'mlgoodput_metrics__odd_key__v_seconds{job_name="j",odd_key="é \\"q\\"/x=1\\\\ \\n"} 3.0' in text
        assert "mlgoodput_jax_compile_seconds_bucket" in text
    finally:
        fast.shutdown()
        plain.shutdown()


def test_a_scrape_with_no_export_since_gets_the_last_page() -> None:
    import urllib.request

    exp = PrometheusExporter(port=0)

    def scrape(accept: str = "") -> str:
        req = urllib.request.Request(f"http://127.0.0.1:{exp.port}/metrics", headers={"Accept": accept})
        with urllib.request.urlopen(req, timeout=10) as r:
            return str(r.read().decode())

    labels = SeriesLabels([("job_name", "j")])
    om_accept = "application/openmetrics-text; version=1.0.0"
    try:
        exp.export([new_sample("goodput/goodput_pct", 50.0, labels)])
        first = scrape()
        assert 'mlgoodput_goodput_ratio{job_name="j"} 0.5' in first and exp.pages_made == 1
        assert scrape() == first and exp.pages_made == 1  # nothing exported since: the same page
        om = scrape(om_accept)
        assert om.endswith("# EOF\n") and exp.pages_made == 2  # another format: made once
        assert scrape(om_accept) == om and exp.pages_made == 2
        exp.export([new_sample("goodput/goodput_pct", 25.0, labels)])
        assert 'mlgoodput_goodput_ratio{job_name="j"} 0.25' in scrape() and exp.pages_made == 3
        assert 'mlgoodput_goodput_ratio{job_name="j"} 0.25' in scrape(om_accept) and exp.pages_made == 4
        exp.export([])  # an export, even of nothing, makes the next scrape render
        assert "0.25" in scrape() and exp.pages_made == 5
    finally:
        exp.shutdown()
