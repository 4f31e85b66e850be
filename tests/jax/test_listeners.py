"""mlgoodput.jax listeners with real JAX on the CPU: registration, aggregation, robustness."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

jax = pytest.importorskip("jax", reason="JAX is an optional extra: pip install 'mlgoodput[jax]'")
import jax.monitoring as jmon  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax._src import monitoring as msrc  # noqa: E402

import mlgoodput.jax as jm  # noqa: E402
from mlgoodput._metric_pipeline import Aggregator, bucket_upper_bound, to_samples  # noqa: E402
from mlgoodput.jax._resource import detect_resource  # noqa: E402
from mlgoodput.testing import FileExporter  # noqa: E402


def _counts() -> tuple[int, int, int, int]:
    return (
        len(msrc._event_listeners),
        len(msrc._event_duration_secs_listeners),
        len(msrc._scalar_listeners),
        len(msrc._event_time_span_listeners),
    )


@pytest.fixture(autouse=True)
def _no_session() -> Iterator[None]:
    jm.shutdown()
    yield
    jm.shutdown()


def test_init_twice_registers_once_and_shutdown_unregisters() -> None:
    before = _counts()
    s1 = jm.init(job_name="reg", exporters=[], store="memory://jax-reg")
    after = _counts()
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1, 1, 1]
    s2 = jm.init(job_name="reg", exporters=[], store="memory://jax-reg")
    assert s2 is s1
    assert _counts() == after
    assert jm.shutdown() is True
    assert _counts() == before
    assert jm.shutdown() is True  # twice is fine
    assert jm.current() is None


def _samples(path: Path) -> list[dict[str, Any]]:
    return [x for row in FileExporter.read(path) for x in row.get("samples", [])]  # type: ignore[attr-defined]


def _latest(path: Path) -> dict[str, float]:
    """The last value of each sample name (labels other than job_name/host/le ignored)."""
    return {x["name"]: x["value"] for x in _samples(path)}


def test_real_compile_is_exported_with_job_and_function_labels(tmp_path: Path) -> None:
    out = tmp_path / "samples.jsonl"
    s = jm.init(job_name="compile-job", exporters=[FileExporter(out)], store="memory://jax-c", interval_s=60)

    @jax.jit  # type: ignore[untyped-decorator]
    def double_it(x: Any) -> Any:
        return x + x

    double_it(jnp.ones((64, 64))).block_until_ready()
    assert s.flush(20)
    samples = _samples(out)
    counts = [
        x
        for x in samples
        if x["name"] == "jax/core/compile/backend_compile_duration/count"
        and x["labels"].get("fun_name") == "jit(double_it)"
    ]
    assert counts and counts[-1]["value"] == 1.0
    assert counts[-1]["labels"]["job_name"] == "compile-job"
    sums = [
        x
        for x in samples
        if x["name"] == "jax/core/compile/backend_compile_duration/sum"
        and x["labels"].get("fun_name") == "jit(double_it)"
    ]
    assert sums[-1]["value"] > 0
    # the compile-phase scalars carry a timestamp, not a value worth aggregating
    assert not any(x["name"].startswith("jax/core/compile/") and x["value"] > 1e6 for x in samples)
    # spans duplicate the durations in this JAX: exported once
    assert not any("_span/" in x["name"] for x in samples)
    # the same shape compiles nothing new; a new shape does
    double_it(jnp.ones((64, 64))).block_until_ready()
    double_it(jnp.ones((32, 64))).block_until_ready()
    assert s.flush(20)
    counts = [
        x
        for x in _samples(out)
        if x["name"] == "jax/core/compile/backend_compile_duration/count"
        and x["labels"].get("fun_name") == "jit(double_it)"
    ]
    assert counts[-1]["value"] == 2.0
    assert jm.shutdown()
    assert FileExporter.read(out)[-1].get("shutdown") is True


def test_listener_never_raises_into_jax() -> None:
    s = jm.init(job_name="robust", exporters=[], store="memory://jax-r")
    jmon.record_event_duration_secs("/test/bad", "not a number")  # type: ignore[arg-type]
    jmon.record_scalar("/test/bad", object())  # type: ignore[arg-type]
    jmon.record_event_time_span("/test/bad", "a", None)  # type: ignore[arg-type]
    jmon.record_event("/test/unhashable", label=[1, 2])  # type: ignore[arg-type]
    assert s.aggregator.errors == 4
    jnp.ones(3).block_until_ready()  # JAX still works


def test_burst_of_200000_events_loses_nothing(tmp_path: Path) -> None:
    out = tmp_path / "samples.jsonl"
    s = jm.init(job_name="burst", exporters=[FileExporter(out)], store="memory://jax-b", interval_s=0.05)

    def worker(n: int) -> None:
        for i in range(n):
            jmon.record_event_duration_secs("/test/burst", 1e-3 * (i % 7), fun_name="f")

    threads = [threading.Thread(target=worker, args=(50_000,)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert jm.shutdown()
    assert s.shipper is not None and s.shipper.rounds >= 1
    latest = _latest(out)
    assert latest["test/burst/count"] == 200_000
    assert latest["test/burst/sum"] == pytest.approx(sum(1e-3 * (i % 7) for i in range(50_000)) * 4)
    assert latest["test/burst/max"] == pytest.approx(6e-3)
    assert latest["test/burst/min"] == 0.0


def test_histogram_buckets_are_cumulative_and_complete() -> None:
    agg = Aggregator()
    values = [0.0, 1e-7, 0.001, 0.0011, 0.5, 3.0, 1e9]
    for v in values:
        agg.on_duration("/h", v)
    samples = to_samples(agg.snapshot(), {"job_name": "j"})
    buckets = [(x.labels["le"], x.value) for x in samples if x.name == "h/bucket"]
    assert buckets[-1] == ("+Inf", float(len(values)))
    cums = [v for _, v in buckets]
    assert cums == sorted(cums)
    for le, c in buckets[:-1]:
        assert c == sum(1 for v in values if v < float(le)), (le, c)
    assert bucket_upper_bound(0) == 2.0**-20


def test_cache_misses_are_requests_minus_hits() -> None:
    agg = Aggregator()
    for _ in range(5):
        agg.on_event("/jax/compilation_cache/compile_requests_use_cache")
    for _ in range(3):
        agg.on_event("/jax/compilation_cache/cache_hits")
    got = {x.name: x.value for x in to_samples(agg.snapshot(), {})}
    assert got["jax/compilation_cache/cache_misses_derived"] == 2.0


def test_labels_with_several_keywords_are_kept_apart() -> None:
    agg = Aggregator()
    agg.on_event("/e", a="x", b=1)
    agg.on_event("/e", a="x", b=2)
    agg.on_event("/e", a="x", b=2)
    agg.on_event("/e")
    snap = {(s.labels, s.count) for s in agg.snapshot()}
    assert snap == {((("a", "x"), ("b", 1)), 1), ((("a", "x"), ("b", 2)), 2), ((), 1)}


def test_resource_is_global_off_gce_and_gce_instance_on_it() -> None:
    assert detect_resource("p", None, None, gce=False) == ("p", "global", {"project_id": "p"})
    md = {"instance/id": "123", "instance/zone": "projects/9/zones/us-central1-a", "project/project-id": "from-md"}
    proj, rtype, labels = detect_resource(None, None, None, gce=True, lookup=md.get)
    assert (proj, rtype) == ("from-md", "gce_instance")
    assert labels == {"instance_id": "123", "zone": "us-central1-a", "project_id": "from-md"}
    assert detect_resource("p", "k8s_container", {"a": "b"}, gce=True, lookup=md.get)[1:] == (
        "k8s_container",
        {"a": "b", "project_id": "p"},
    )


def test_bad_arguments_are_refused_at_init() -> None:
    with pytest.raises(TypeError, match="job_name"):
        jm.init(job_name=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="interval_s"):
        jm.init(job_name="x", interval_s=0)
    with pytest.raises(TypeError, match="exporters"):
        jm.init(job_name="x", exporters="prometheus")
    assert jm.current() is None


def test_concurrent_listeners_and_readers_count_every_value() -> None:
    agg = Aggregator(fold_at=3)  # folds all the time, from listeners and the reader
    stop = threading.Event()
    seen: list[int] = []

    def reader() -> None:
        while not stop.is_set():
            seen.append(agg.total_count())

    def writer(k: int) -> None:
        for i in range(20_000):
            agg.on_duration("/c", float(i % 10), fun_name=f"f{k % 2}")

    r = threading.Thread(target=reader)
    r.start()
    ws = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for w in ws:
        w.start()
    for w in ws:
        w.join()
    stop.set()
    r.join()
    snap = {dict(s.labels)["fun_name"]: s for s in agg.snapshot()}
    assert snap["f0"].count == snap["f1"].count == 40_000
    assert snap["f0"].sum == 2 * sum(float(i % 10) for i in range(20_000))
    assert (snap["f0"].min, snap["f0"].max) == (0.0, 9.0)
    assert sum(snap["f1"].buckets) == 40_000
    assert seen == sorted(seen)  # totals only grow


class _Capture:
    def __init__(self, fail: bool = False) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.fail = fail

    def append(
        self,
        kind: Any,
        time: float,
        step: int | None = None,
        value: float | None = None,
        name: str | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> None:
        if self.fail:
            raise OSError("journal broken")
        self.events.append((kind, time, value, name))


def test_compile_listeners_from_spans_and_from_durations() -> None:
    from mlgoodput.events import Kind
    from mlgoodput.jax._listeners import compile_listeners

    cap = _Capture()
    span = compile_listeners(cap, spans=True)["span"]
    span("/jax/core/compile/backend_compile_duration", 100.0, 100.5, fun_name="jit(f)")
    span("/jax/other/thing", 1.0, 2.0)  # not a compile phase: ignored
    dur = compile_listeners(cap, clock=lambda: 50.0, spans=False)["duration"]
    dur("/jax/core/compile/jaxpr_trace_duration", 0.25, fun_name="f")
    assert cap.events == [(Kind.COMPILE, 100.0, 0.5, "jit(f)"), (Kind.COMPILE, 49.75, 0.25, "f")]
    broken = compile_listeners(_Capture(fail=True), spans=True)["span"]
    broken("/jax/core/compile/backend_compile_duration", 1.0, 2.0)  # never raises into JAX


def test_histograms_can_be_left_out(tmp_path: Path) -> None:
    out = tmp_path / "samples.jsonl"
    s = jm.init(
        job_name="nohist", exporters=[FileExporter(out)], store="memory://jax-nh", interval_s=60, histograms=False
    )
    jmon.record_event_duration_secs("/test/nohist", 0.5)
    assert s.flush(20)
    names = {x["name"] for x in _samples(out)}
    assert "test/nohist/count" in names and not any(n.endswith("/bucket") for n in names)
