"""Our live Prometheus endpoint passes `promtool check metrics` (JAX histograms included)."""

from __future__ import annotations

import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from mlgoodput._monitoring._source import GoodputSource
from mlgoodput.events import EventBatch
from mlgoodput.export import PrometheusExporter
from mlgoodput.store import open_store
from timelines import all_timelines, load

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian package prometheus) is not installed")


def _store_with(tmp_path: Path, stem: str) -> tuple[str, str, str]:
    tl = load(next(p for p in all_timelines() if p.stem == stem))
    url = f"sqlite://{tmp_path}/m.db"
    st = open_store(url)
    st.append(f"goodput_{tl.job_name}", tl.job_name, EventBatch(1, 0, tl.events))
    st.close()
    return url, f"goodput_{tl.job_name}", tl.job_name


def _jax_samples() -> list:  # type: ignore[type-arg]
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from mlgoodput._metric_pipeline import Aggregator, to_samples

    agg = Aggregator()
    jax.monitoring.register_event_listener(agg.on_event)
    jax.monitoring.register_event_duration_secs_listener(agg.on_duration)
    try:
        jax.jit(lambda x: x * 3 + 1)(jnp.ones(8)).block_until_ready()
    finally:
        jax.monitoring.unregister_event_listener(agg.on_event)
        jax.monitoring.unregister_event_duration_listener(agg.on_duration)
    return to_samples(agg.snapshot(), {"job_name": "lint"})


def fleet_gauges(tmp_path: Path) -> list:  # type: ignore[type-arg]
    """Fleet gauges (`monitor --fleet`) of a priced fleet: a job whose every productivity figure
    is known (a queue, FLOPs) and two more teams, the smallest summed into group="other"."""
    from mlgoodput.accounting import FleetSource, Prices
    from mlgoodput.events import Event, Kind
    from mlgoodput.export import fleet_samples

    tl = load(next(p for p in all_timelines() if p.stem.startswith("p1_")))
    st = open_store(f"sqlite://{tmp_path}/fleet.db")
    try:
        st.append(f"goodput_{tl.job_name}", tl.job_name, EventBatch(1, 0, tl.events))
        for w, team in enumerate(("nlp", "vision"), start=2):
            t = tl.events[0].time
            ev = [
                Event(Kind.JOB_START, t),
                Event(Kind.JOB_LABELS, t, value=float(w), name="H100", attrs={"labels": {"team": team}}),
            ]
            ev += [Event(Kind.STEP_START, t + 1 + k, step=k) for k in range(10 * w)]
            st.append("log", team, EventBatch(w, 0, [*ev, Event(Kind.JOB_END, t + 20 * w)]))
        report = FleetSource(st, clock=lambda: tl.query).report(0.0, tl.query + 3600, "team", Prices(default=2.0))
    finally:
        st.close()
    return fleet_samples(report.to_dict(), top_groups=2, time=tl.query)


def endpoint_text(tmp_path: Path) -> str:
    """What our exporter serves for a real job (two hosts, a restart), real JAX compiles and
    the gauges of a small fleet."""
    url, logger, job = _store_with(tmp_path, "s8_multihost_duplicates")
    samples = []
    for mode in ("cumulative", "rolling"):
        src = GoodputSource(job, logger, url, mode=mode, windows_s=(60, 300), include_step_deviation=True)
        samples += src.collect(0.0)
    samples += _jax_samples()
    samples += fleet_gauges(tmp_path)
    exp = PrometheusExporter(port=0)
    try:
        exp.export(samples)
        with urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics", timeout=10) as r:
            text = r.read().decode()
    finally:
        exp.shutdown()
    return text


@needs_promtool
def test_endpoint_is_clean_under_promtool(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    text = endpoint_text(tmp_path)
    res = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
    types = dict(ln.split()[2:4] for ln in text.splitlines() if ln.startswith("# TYPE"))
    # JAX compile times are real histograms in seconds; counters end in _total
    hist = [n for n, t in types.items() if t == "histogram"]
    assert "mlgoodput_jax_core_compile_backend_compile_duration_seconds" in hist
    assert all(n.endswith("_total") for n, t in types.items() if t == "counter")
    assert not any(n.endswith(("_bucket_total", "_count_total", "_sum_total")) for n in types)
    helps = {ln.split()[2] for ln in text.splitlines() if ln.startswith("# HELP")}
    assert set(types) <= helps
    assert types["mlgoodput_goodput_ratio"] == "gauge" and types["mlgoodput_badput_seconds"] == "gauge"
    # fleet gauges: every figure of a group and of the whole fleet, the smallest group in other
    fleet = {n for n, t in types.items() if n.startswith("mlgoodput_fleet_") and t == "gauge"}
    for fig in ("goodput", "scheduling_goodput", "program_goodput", "ml_productivity_goodput", "ettr"):
        assert {f"mlgoodput_fleet_{fig}_ratio", f"mlgoodput_fleet_total_{fig}_ratio"} <= fleet, fig
    assert {
        "mlgoodput_fleet_accelerator_seconds",
        "mlgoodput_fleet_badput_seconds",
        "mlgoodput_fleet_lost_cost",
    } <= fleet
    assert 'group="other"' in text and 'group="none"' in text  # the job without a team is shown


def test_rolling_ratio_of_a_finished_job_is_its_last_window(tmp_path: Path) -> None:
    """Long after the job ended, a rolling window ending now holds none of it: the window
    ends at the job's end instead of reporting 0 %."""
    url, logger, job = _store_with(tmp_path, "s1_clean_run")
    src = GoodputSource(job, logger, url, mode="rolling", windows_s=(60,))
    got = {s.name: s.value for s in src.collect(0.0)}
    assert got["rolling/{window}/total_seconds"] == pytest.approx(60.0)
    assert got["rolling/{window}/goodput_pct"] > 50.0
