"""Fleet gauges: the FleetReport's own figures as Prometheus and OTLP series, with the groups
bounded (top N by accelerator-hours, the rest summed as `other`), and a group that leaves the
top N no longer served."""

from __future__ import annotations

import math
import pickle
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from tests.export.conftest import scrape
from tests.export.fleet_jobs import TEAMS, FileClock, H, base_time, write_jobs
from tests.export.test_export_real_servers import PROMETHEUS, free_port, get_json, start_prometheus

from mlgoodput._cli._fleet_gauges import FleetGauges, fleet_range
from mlgoodput.accounting import FleetSource, Prices
from mlgoodput.export import ExporterProcess, OTLPExporter, PrometheusExporter, Sample, fleet_samples
from mlgoodput.export._fleet import OTHER_GROUP, bounded_groups
from mlgoodput.export._otlp import otlp_name
from mlgoodput.export._prometheus import prometheus_name
from mlgoodput.store import SQLiteStore
from mlgoodput.testing import OTLPReceiver
from waiting import wait_for

ADDITIVE = ("accelerator_hours", "productive_hours", "lost_hours", "queue_hours")


def _report(path: str, by: str = "team", prices: Prices | None = None, now: float | None = None) -> dict[str, Any]:
    """What FleetSource.report says for the gauges' range (a fresh source, as a test's own check)."""
    st = SQLiteStore(path)
    try:
        since, until = fleet_range(time.time() if now is None else now, 7.0)
        return FleetSource(st).report(since, until, by, prices).to_dict()
    finally:
        st.close()


def _by_series(samples: list[Sample]) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for s in samples}


def _group(samples: list[Sample], name: str, group: str, **labels: str) -> float | None:
    want = {"group": group, **labels}
    got = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in want.items())]
    assert len(got) <= 1, (name, group, got)
    return got[0] if got else None


# -- bounded groups -------------------------------------------------------------------------
def test_fifty_groups_are_the_top_n_and_other_with_sums_kept(tmp_path: Path) -> None:
    path = str(tmp_path / "f.db")
    jobs = [(f"j{i}", {"team": f"t{i:02d}"}, 1 + i % 7, 5 + 3 * i) for i in range(50)]
    jobs.append(("nolabel", {"model": "x"}, 3, 40))  # group null -> "none"
    write_jobs(path, jobs)
    prices = Prices(default=2.0, by_type={"H100": 3.0}, currency="EUR")
    now = time.time()
    want = _report(path, prices=prices, now=now)
    assert len(want["groups"]) == 51
    got = FleetGauges(path, top_groups=10, prices=prices).collect(now)
    groups = {s.labels["group"] for s in got if s.name == "fleet/accelerator_seconds"}
    ranked = sorted(want["groups"], key=lambda g: (-g["accelerator_hours"], str(g["key"])))
    top = {"none" if g["key"] is None else g["key"] for g in ranked[:10]}
    assert groups == top | {OTHER_GROUP} and len(groups) == 11
    # each group shown is the report's row, exactly
    for g in ranked[:10]:
        label = "none" if g["key"] is None else g["key"]
        for k in ADDITIVE:
            assert _group(got, f"fleet/{k[: -len('_hours')]}_seconds", label) == g[k] * 3600.0
        assert _group(got, "fleet/goodput_ratio", label) == g["goodput"]
        assert _group(got, "fleet/ettr_ratio", label) == g["ettr"]
        assert _group(got, "fleet/lost_cost", label, currency="EUR") == g["cost"]["lost"]
        for b in want["buckets"]:
            assert _group(got, "fleet/badput/{bucket}_seconds", label, bucket=b) == g["badput_hours"][b] * 3600.0
    # every figure that adds up sums over the exported groups to the report's groups (and total)
    for k in ADDITIVE:
        name = f"fleet/{k[: -len('_hours')]}_seconds"
        exported = sum(s.value for s in got if s.name == name)
        assert exported == pytest.approx(sum(g[k] for g in want["groups"]) * 3600.0, rel=1e-12)
        assert exported == pytest.approx(want["total"][k] * 3600.0, rel=1e-12)
        total = [s.value for s in got if s.name == f"fleet/total/{k[: -len('_hours')]}_seconds"]
        assert total == [want["total"][k] * 3600.0]
    assert sum(s.value for s in got if s.name == "fleet/jobs") == want["total"]["jobs"] == 51
    for b in want["buckets"]:
        exported = sum(s.value for s in got if s.name == "fleet/badput/{bucket}_seconds" and s.labels["bucket"] == b)
        assert exported == pytest.approx(want["total"]["badput_hours"][b] * 3600.0, rel=1e-12, abs=1e-9)
    cost = sum(s.value for s in got if s.name == "fleet/cost")
    assert cost == pytest.approx(want["total"]["cost"]["total"], rel=1e-12)
    # other: its goodput is productive over accelerator time; no weighted figures
    other_acc = _group(got, "fleet/accelerator_seconds", OTHER_GROUP)
    other_prod = _group(got, "fleet/productive_seconds", OTHER_GROUP)
    assert other_acc and other_prod
    assert _group(got, "fleet/goodput_ratio", OTHER_GROUP) == pytest.approx(other_prod / other_acc, rel=1e-12)
    for k in ("scheduling_goodput", "program_goodput", "ml_productivity_goodput", "ettr"):
        assert _group(got, f"fleet/{k}_ratio", OTHER_GROUP) is None
    # the whole fleet's figures and the bound's inputs
    assert [s.value for s in got if s.name == "fleet/total/goodput_ratio"] == [want["total"]["goodput"]]
    assert [s.value for s in got if s.name == "fleet/groups"] == [51.0]
    # cardinality: 11 groups x (jobs, 4 times, 14 buckets, <= 5 ratios, 2 costs) at most
    per_group = [s for s in got if "group" in s.labels]
    assert len(per_group) <= 11 * (1 + 4 + len(want["buckets"]) + 5 + 2)
    assert len(got) <= (10 + 1) * 26 + 26 + 2  # the bound docs/exporting.md states
    assert all(s.time == now for s in got)  # one round


def test_reserved_labels_never_make_two_series_alike() -> None:
    rows = [
        {"key": None, "accelerator_hours": 5.0},
        {"key": "none", "accelerator_hours": 4.0},  # a team called "none": beside the null group
        {"key": "other", "accelerator_hours": 9.0},  # a team called "other": always in other
        {"key": "a", "accelerator_hours": 1.0},
    ]
    shown, rest = bounded_groups(rows, 3)
    assert [label for label, _ in shown] == ["none", "a"]
    assert [r["key"] for r in rest] == ["other", "none"]
    shown, rest = bounded_groups(rows, 0)
    assert shown == [] and len(rest) == 4
    with pytest.raises(ValueError, match="top_groups"):
        fleet_samples({"by": "team", "buckets": [], "groups": [], "total": {}}, top_groups=-1, time=0.0)


def test_gauges_pickle_and_check_arguments(tmp_path: Path) -> None:
    path = str(tmp_path / "f.db")
    write_jobs(path, TEAMS)
    g = FleetGauges(path, by=" team ", top_groups=2)
    assert g.by == "team"
    assert g.collect(time.time())
    g2 = pickle.loads(pickle.dumps(g))  # the live FleetSource and store stay behind
    assert g2._source is None and g2.reports == 1
    g.close()
    for bad in ({"by": " "}, {"range_days": 0.0}, {"range_days": math.inf}, {"top_groups": -1}):
        with pytest.raises(ValueError):
            FleetGauges(path, **bad)  # type: ignore[arg-type]
    since, until = fleet_range(1_700_000_000.5, 7.0)
    assert until == 1_700_000_000.5 and since % 3600 == 0 and until - since - 7 * 86400 < 3600


def test_a_running_job_counts_up_to_the_round(tmp_path: Path) -> None:
    """A running job's figures end at the round's time, as a report made at that instant says,
    and its last hour is not one the range cuts (no exact accounting asked each round)."""
    from tests.export.fleet_jobs import job

    from mlgoodput.events import EventBatch

    path = str(tmp_path / "f.db")
    t = base_time() + 5 * H
    running = job(t, {"team": "nlp"}, 4, 600)[:-1]  # no job end
    st = SQLiteStore(path)
    try:
        st.append("log", "run", EventBatch(1, 0, running))
    finally:
        st.close()
    write_jobs(path, TEAMS[1:3], writer0=10)
    g = FleetGauges(path, top_groups=5)
    g.open()
    assert g._source is not None
    exact = g._source._exact
    asked: list[tuple[float, float]] = []

    def counted(s: Any, lo: float, hi: float) -> Any:
        asked.append((lo, hi))
        return exact(s, lo, hi)

    g._source._exact = counted  # type: ignore[method-assign]
    for at in (t + 3000.0, t + 3500.0):
        got = g.collect(at)
        st = SQLiteStore(path)
        try:
            want = FleetSource(st, clock=lambda at=at: at).report(*fleet_range(at, 7.0), "team").to_dict()
        finally:
            st.close()
        rows = {r["key"]: r for r in want["groups"]}
        assert _group(got, "fleet/accelerator_seconds", "nlp") == rows["nlp"]["accelerator_hours"] * 3600.0
        assert _group(got, "fleet/productive_seconds", "nlp") == rows["nlp"]["productive_hours"] * 3600.0
        assert rows["nlp"]["accelerator_hours"] * 3600.0 == pytest.approx(4 * (at - t))
    assert asked == []
    g.close()


# -- Prometheus keeps the newest round ----------------------------------------------------
def test_a_group_that_left_the_top_is_no_longer_served() -> None:
    exp = PrometheusExporter(port=0)
    exp.start()
    try:
        by = {"by": "team"}
        job = Sample("goodput/goodput_pct", 50.0, {"job_name": "j", "logger_name": "l"})
        r1 = [
            Sample("fleet/accelerator_seconds", 10.0, {**by, "group": "a"}, time=1.0),
            Sample("fleet/accelerator_seconds", 5.0, {**by, "group": "b"}, time=1.0),
            Sample("fleet/ettr_ratio", 0.5, {**by, "group": "b"}, time=1.0),
            Sample("fleet/accelerator_seconds", 7.0, {"by": "model", "group": "m"}, time=1.0),
        ]
        exp.export([job, *r1])
        page = scrape(exp.port)
        assert page[("mlgoodput_fleet_accelerator_seconds", (("by", "team"), ("group", "b")))] == 5.0
        # the next round: b is in other now, and its ETTR unknown
        r2 = [
            Sample("fleet/accelerator_seconds", 11.0, {**by, "group": "a"}, time=2.0),
            Sample("fleet/accelerator_seconds", 6.0, {**by, "group": "other"}, time=2.0),
        ]
        exp.export(r2)
        page = scrape(exp.port)
        fleet = {k: v for k, v in page.items() if k[0].startswith("mlgoodput_fleet_")}
        assert fleet == {
            ("mlgoodput_fleet_accelerator_seconds", (("by", "team"), ("group", "a"))): 11.0,
            ("mlgoodput_fleet_accelerator_seconds", (("by", "team"), ("group", "other"))): 6.0,
            # another grouping's round is its own
            ("mlgoodput_fleet_accelerator_seconds", (("by", "model"), ("group", "m"))): 7.0,
        }
        assert page[("mlgoodput_goodput_ratio", (("job_name", "j"), ("logger_name", "l")))] == 0.5
        exp.export(r1[:1])  # an older round arriving late changes nothing it does not name
        assert len([k for k in scrape(exp.port) if k[0] == "mlgoodput_fleet_accelerator_seconds"]) == 3
    finally:
        exp.shutdown()


@pytest.mark.slow
def test_groups_that_leave_the_range_leave_the_endpoint(tmp_path: Path) -> None:
    """The range moves on with the uploads: a group whose jobs fell out of it, and `other`
    once nothing is left beyond the top N, are no longer served (the exporter process, a real
    FleetSource and endpoint; the source's clock moved between two uploads)."""
    path = str(tmp_path / "f.db")
    t0 = base_time()
    write_jobs(path, [("e", {"team": "early"}, 1, 50)], t0)
    write_jobs(path, [("m", {"team": "mid"}, 2, 100)], t0 + H, writer0=10)
    write_jobs(path, [("l", {"team": "late"}, 8, 100)], t0 + 5 * H, writer0=20)
    clock = FileClock(str(tmp_path / "clock"), time.time())
    proc = ExporterProcess([PrometheusExporter(port=0)], interval_s=600)
    proc.start()
    try:
        port = int(str(proc.addresses[0]).rsplit(":", 1)[1].split("/")[0])
        proc.add_source("fleet", FleetGauges(path, top_groups=2, clock=clock))

        def groups() -> set[str]:
            return {dict(k[1])["group"] for k in scrape(port) if k[0] == "mlgoodput_fleet_accelerator_seconds"}

        assert wait_for(lambda: groups() == {"late", "mid", "other"}, 60), groups()
        clock.set(t0 + 7 * 86400 + 3 * H)  # the range now starts at t0 + 3 h: early and mid are out
        assert proc.flush(60)
        page = scrape(port)
        assert groups() == {"late"}
        assert page[("mlgoodput_fleet_groups", (("by", "team"),))] == 1.0
        acc = page[("mlgoodput_fleet_accelerator_seconds", (("by", "team"), ("group", "late")))]
        assert page[("mlgoodput_fleet_total_accelerator_seconds", (("by", "team"),))] == acc
        assert not [k for k in page if dict(k[1]).get("group") in ("mid", "early", "other")]
    finally:
        assert proc.stop(20)


# -- OTLP ---------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("proto", ["grpc", "http"])
def test_otlp_gets_the_reports_figures(tmp_path: Path, proto: str) -> None:
    path = str(tmp_path / "f.db")
    write_jobs(path, TEAMS)
    want = _report(path, prices=Prices(default=2.0))
    with OTLPReceiver(proto) as rx:
        proc = ExporterProcess([OTLPExporter(endpoint=rx.endpoint, protocol=proto, timeout_s=5)], interval_s=600)
        proc.start()
        try:
            proc.add_source("fleet", FleetGauges(path, top_groups=2, prices=Prices(default=2.0)))
            name = otlp_name("fleet/accelerator_seconds")[0]
            assert name == "mlgoodput.fleet.accelerator.seconds"
            wait_for(lambda: rx.latest(name, group="other") is not None, 60, "the first upload over OTLP")
            rows = {g["key"]: g for g in want["groups"]}
            assert rx.latest(name, by="team", group="nlp") == rows["nlp"]["accelerator_hours"] * 3600.0
            assert rx.latest(name, by="team", group="vision") == rows["vision"]["accelerator_hours"] * 3600.0
            other = rows["speech"]["accelerator_hours"] + rows[None]["accelerator_hours"]
            assert rx.latest(name, group="other") == pytest.approx(other * 3600.0, rel=1e-12)
            ratio = otlp_name("fleet/goodput_ratio")[0]
            assert rx.latest(ratio, group="nlp") == rows["nlp"]["goodput"]
            assert rx.latest(otlp_name("fleet/total/ettr_ratio")[0], by="team") == want["total"]["ettr"]
            cost = otlp_name("fleet/lost_cost")[0]
            assert rx.latest(cost, group="nlp", currency="USD") == rows["nlp"]["cost"]["lost"]
            bad = otlp_name("fleet/badput/{bucket}_seconds")[0]
            init = rows["nlp"]["badput_hours"]["tpu_initialization"] * 3600.0
            assert init > 0 and rx.latest(bad, group="nlp", bucket="tpu_initialization") == init
        finally:
            assert proc.stop(20)


@pytest.mark.slow
def test_a_backend_that_was_down_gets_the_latest_figures(tmp_path: Path) -> None:
    """OTLP refusing the first uploads: nothing crashes, and once it answers the next upload
    carries the latest figures."""
    path = str(tmp_path / "f.db")
    write_jobs(path, TEAMS)
    want = _report(path)
    with OTLPReceiver("grpc") as rx:
        rx.fail = True
        exp = OTLPExporter(endpoint=rx.endpoint, protocol="grpc", timeout_s=2)
        proc = ExporterProcess([exp], interval_s=600, max_backoff_s=0.5)
        proc.start()
        try:
            proc.add_source("fleet", FleetGauges(path, top_groups=5))
            assert not proc.flush(5)  # refused: the figures wait in the exporter process
            assert not rx.points and proc.alive
            rx.fail = False
            name = otlp_name("fleet/total/accelerator_seconds")[0]
            got = wait_for(lambda: rx.latest(name, by="team"), 60, "the upload after the backend is back")
            assert got == want["total"]["accelerator_hours"] * 3600.0
            assert proc.alive
        finally:
            assert proc.stop(20)


# -- a real Prometheus server ---------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(PROMETHEUS is None, reason="the Debian 'prometheus' package is not installed")
def test_prometheus_server_queries_equal_the_report(
    tmp_path: Path,
    server_proc: list[subprocess.Popen[bytes]],
) -> None:
    path = str(tmp_path / "f.db")
    write_jobs(path, TEAMS)
    want = _report(path, prices=Prices(default=2.5))
    ours, theirs = free_port(), free_port()
    proc = ExporterProcess([PrometheusExporter(port=ours)], interval_s=600)
    proc.start()
    try:
        proc.add_source("fleet", FleetGauges(path, top_groups=2, prices=Prices(default=2.5)))
        assert proc.flush(60)
        server_proc.append(start_prometheus(tmp_path, ours, theirs))

        def query(expr: str) -> Any:
            url = f"http://127.0.0.1:{theirs}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
            try:
                return get_json(url)["data"]["result"] or None
            except OSError:  # still starting
                return None

        def one(expr: str) -> float:
            res = wait_for(lambda: query(expr), 60, expr)
            assert len(res) == 1, res
            return float(res[0]["value"][1])

        rows = {g["key"]: g for g in want["groups"]}
        acc = prometheus_name("fleet/accelerator_seconds", unit="s")[0]
        assert acc == "mlgoodput_fleet_accelerator_seconds"
        for key in ("nlp", "vision"):
            g = rows[key]
            assert one(f'{acc}{{by="team",group="{key}"}}') == g["accelerator_hours"] * 3600.0
            assert one(f'mlgoodput_fleet_goodput_ratio{{group="{key}"}}') == g["goodput"]
            assert one(f'mlgoodput_fleet_ettr_ratio{{group="{key}"}}') == g["ettr"]
            assert one(f'mlgoodput_fleet_lost_cost{{group="{key}",currency="USD"}}') == g["cost"]["lost"]
            stall = one(f'mlgoodput_fleet_badput_seconds{{group="{key}",bucket="tpu_initialization"}}')
            assert stall == g["badput_hours"]["tpu_initialization"] * 3600.0
        # speech and the job without a team are summed in other; the sums are the total's
        other = (rows["speech"]["accelerator_hours"] + rows[None]["accelerator_hours"]) * 3600.0
        assert one(f'{acc}{{group="other"}}') == pytest.approx(other, rel=1e-12)
        assert one(f"sum({acc})") == pytest.approx(want["total"]["accelerator_hours"] * 3600.0, rel=1e-12)
        assert one("mlgoodput_fleet_total_accelerator_seconds") == want["total"]["accelerator_hours"] * 3600.0
        assert one("mlgoodput_fleet_total_goodput_ratio") == want["total"]["goodput"]
        assert one("mlgoodput_fleet_groups") == 4.0
        assert one('count(mlgoodput_fleet_accelerator_seconds{by="team"})') == 3.0
    finally:
        proc.stop(10)
