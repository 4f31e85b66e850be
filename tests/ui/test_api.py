"""The JSON API over a real SQLite store and a real server: the same numbers as `report --json`,
the timeline's phases, reduction to screen resolution, the token and the Host check."""

from __future__ import annotations

import io
import itertools
import json
import math
import time
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from ui_helpers import PUBLIC, fill, get, scenario

from mlgoodput import cli
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore
from mlgoodput.ui import _server
from mlgoodput.ui._server import is_loopback


def cli_report(url: str, job: str, at: float) -> dict[str, Any]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert cli.main(["report", "--job", job, "--store", url, "--json", "--at", repr(at)]) == 0
    return json.loads(buf.getvalue())  # type: ignore[no-any-return]


def lane_seconds(tl: dict[str, Any]) -> dict[str, float]:
    """Seconds per bucket that the timeline's attempt lanes colour (mixed pieces included)."""
    out: dict[str, float] = {}
    for lane in tl["lanes"]:
        if lane["kind"] != "attempt":
            continue
        for s in lane["segments"]:
            for b, sec in s["mix"].items() if "mix" in s else [(s["bucket"], s["end"] - s["start"])]:
                out[b] = out.get(b, 0.0) + sec
    return out


def report_seconds(rep: dict[str, Any]) -> dict[str, float]:
    """The report's seconds per bucket, named as the timeline names them."""
    out = {"productive": rep["productive_s"]}
    for k, v in rep["badput_s"].items():
        if isinstance(v, dict):
            out.update({f"{k}:{n}": s for n, s in v.items()})
        elif v:
            out[k] = v
    return out


@pytest.mark.parametrize("name", PUBLIC)
def test_report_equals_cli_report_json(name: str, store: SQLiteStore, serve: Any) -> None:
    tl = scenario(name)
    fill(store, tl)
    srv = serve(store, clock=lambda: tl.query)
    base = srv.url.rstrip("/")
    want = cli_report(store.url, tl.job_name, tl.query)
    status, got, _ = get(f"{base}/api/jobs/{quote(tl.job_name)}/report")
    assert status == 200
    assert got == want
    status, detail, _ = get(f"{base}/api/jobs/{quote(tl.job_name)}")
    assert detail["report"] == want
    assert len(detail["attempts"]) == want["disruptions"] + 1
    # the attempts are the accounting's: the same starts as the report's own attempt figures
    assert detail["attempts"] and want["productivity"]["attempts"]
    assert [a["start"] for a in detail["attempts"]] == [a["start"] for a in want["productivity"]["attempts"]]
    status, jobs, _ = get(f"{base}/api/jobs")
    assert status == 200
    # the listing warms in the background: ask until the row is computed
    for _ in range(200):
        row = next(r for r in jobs["jobs"] if r["job"] == tl.job_name)
        if row["status"] != "loading":
            break
        _, jobs, _ = get(f"{base}/api/jobs")
    assert row["goodput_pct"] == want["goodput_pct"]
    assert row["last_step"] == want["last_step"]
    assert row["attempts"] == want["disruptions"] + 1


@pytest.mark.slow
@pytest.mark.parametrize("width", [60, 4000])
@pytest.mark.parametrize("name", PUBLIC)
def test_timeline_colours_the_reports_seconds(name: str, width: int, store: SQLiteStore, serve: Any) -> None:
    """Every coloured second of the timeline is the report's: seconds per bucket are equal, at
    any zoom (narrow pieces keep each bucket's seconds), one lane per attempt, numbered from 1."""
    tl = scenario(name)
    fill(store, tl)
    srv = serve(store, clock=lambda: tl.query)
    status, got, _ = get(f"{srv.url}api/jobs/{quote(tl.job_name)}/timeline?width={width}")
    assert status == 200
    _, rep, _ = get(f"{srv.url}api/jobs/{quote(tl.job_name)}/report")
    colours, want = lane_seconds(got), report_seconds(rep)
    assert set(colours) == {k for k, v in want.items() if v > 1e-9}
    for k, v in want.items():
        assert colours.get(k, 0.0) == pytest.approx(v, abs=1e-6), k
    lanes = [ln for ln in got["lanes"] if ln["kind"] == "attempt"]
    assert [ln["lane"] for ln in lanes] == [f"attempt {k + 1}" for k in range(rep["disruptions"] + 1)]
    for lane in lanes:
        for a, b in itertools.pairwise(lane["segments"]):
            assert a["end"] <= b["start"] + 1e-9  # laid end to end, never over each other


@pytest.mark.slow
def test_series_are_reduced_to_the_screen(tmp_path: Path, serve: Any) -> None:
    st = SQLiteStore(tmp_path / "big.db")
    t0 = 1_700_000_000.0
    n = 120_000
    ev = [Event(Kind.JOB_START, t0)]
    t = t0 + 1
    slow = {5_000: 4.0, 77_777: 9.0}  # two stalls that the reduction must keep
    for k in range(n):
        ev.append(Event(Kind.STEP_START, t, step=k))
        t += slow.get(k, 0.1)
    ev.append(Event(Kind.JOB_END, t))
    st.append("goodput_big", "big", EventBatch(1, 0, ev))
    srv = serve(st, clock=lambda: t + 1)
    status, s, _ = get(f"{srv.url}api/jobs/big/steps?width=600")
    assert status == 200
    assert len(s["x"]) <= 600
    assert max(v for v in s["max"] if v is not None) == pytest.approx(9.0)
    assert {x["step"] for x in s["stalls"]} == {5_000, 77_777}
    status, tlj, _ = get(f"{srv.url}api/jobs/big/timeline?width=600")
    assert sum(len(ln["segments"]) for ln in tlj["lanes"]) < 20
    status, g, _ = get(f"{srv.url}api/jobs/big/goodput?points=50&window=600")
    assert 0 < len(g["x"]) <= 50
    # the pieces add up to the job: the last cumulative point is the headline figure
    _, rep, _ = get(f"{srv.url}api/jobs/big/report")
    if g["complete"]:
        assert g["cumulative"][-1] == pytest.approx(rep["goodput_pct"], abs=1e-6)
    body = json.dumps(s)
    assert len(body) < 200_000
    st.close()


def test_token_is_required_and_checked(store: SQLiteStore, serve: Any) -> None:
    tl = scenario("s1_clean_run")
    fill(store, tl)
    srv = serve(store, token="s3cret-token")
    base = srv.url.split("?")[0]
    assert srv.url.endswith("?token=s3cret-token")
    assert get(base + "api/jobs")[0] == 403
    assert get(base + "api/jobs?token=wrong")[0] == 403
    assert get(base, {"Cookie": "mlgoodput_ui_token=nope"})[0] == 403
    status, _, hdrs = get(base + "?token=s3cret-token")
    assert status == 200
    cookie = hdrs["Set-Cookie"].split(";")[0]
    assert "HttpOnly" in hdrs["Set-Cookie"]
    assert get(base + "api/jobs", {"Cookie": cookie})[0] == 200
    assert get(base + "api/jobs", {"Authorization": "Bearer s3cret-token"})[0] == 200


def test_loopback_refuses_foreign_host_names(store: SQLiteStore, serve: Any) -> None:
    srv = serve(store)
    assert srv.token is None
    assert get(srv.url + "api/jobs")[0] == 200
    assert get(srv.url + "api/jobs", {"Host": "attacker.example:80"})[0] == 403
    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.4")


def test_names_with_slashes_and_spaces(store: SQLiteStore, serve: Any) -> None:
    tl = scenario("s1_clean_run")
    tl.job_name = "team/a b?c"
    fill(store, tl)
    srv = serve(store, clock=lambda: tl.query)
    status, rep, _ = get(f"{srv.url}api/jobs/{quote(tl.job_name, safe='')}/report")
    assert status == 200 and rep["job_name"] == "team/a b?c"
    assert get(f"{srv.url}jobs/{quote(tl.job_name, safe='')}")[0] == 200


def test_errors_are_one_json_line(store: SQLiteStore, serve: Any) -> None:
    srv = serve(store)
    status, body, _ = get(srv.url + "api/jobs/nope")
    assert status == 404 and "no job named 'nope'" in body["error"]
    assert get(srv.url + "api/jobs/x/steps?width=abc")[0] in (400, 404)
    assert get(srv.url + "static/../../etc/passwd")[0] == 404
    assert get(srv.url + "api/runs/none/profiles/0/0")[0] == 404


def test_missing_chart_files_are_named_with_the_build_command(
    tmp_path: Path, monkeypatch: Any, store: SQLiteStore, serve: Any
) -> None:
    monkeypatch.setattr(_server, "VENDOR", tmp_path / "none")
    assert _server.assets_missing() == ["uPlot.iife.min.js", "uPlot.min.css"]
    srv = serve(store)
    _, body, _ = get(srv.url + "api/health")
    assert body["assets_missing"] and "make ui-assets" in body["build_hint"]


def test_nan_metric_values_become_null(tmp_path: Path, serve: Any) -> None:
    st = SQLiteStore(tmp_path / "r.db")
    t0 = 1_700_000_000.0
    st.append(
        "mlgoodput.run",
        "r1",
        EventBatch(
            1,
            0,
            [
                Event(Kind.RUN_START, t0, attrs={"configs": {"lr": 0.1}}),
                Event(Kind.METRIC, t0 + 1, step=1, value=math.nan, name="loss"),
                Event(Kind.METRIC, t0 + 2, step=2, value=0.5, name="loss"),
            ],
        ),
    )
    srv = serve(st)
    status, run, _ = get(srv.url + "api/runs/r1")
    assert status == 200
    assert run["metrics"]["loss"]["count"] == 2
    assert run["configs"] == {"lr": 0.1}
    st.close()


def test_cli_ui_on_a_missing_store_is_one_line_and_creates_nothing(tmp_path: Path, capsys: Any) -> None:
    missing = tmp_path / "none.db"
    assert cli.main(["ui", "--store", str(missing), "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no store at" in err[0]
    assert not missing.exists()


@pytest.mark.parametrize("name", ["s8_multihost_duplicates", "s4_disruption_restart", "s7_crash_loop"])
def test_goodput_over_time_adds_up_to_the_report(name: str, store: SQLiteStore, serve: Any) -> None:
    """The pieces (windowed reports; of the lead host alone when there are several) add up
    to the headline figure."""
    tl = scenario(name)
    fill(store, tl)
    srv = serve(store, clock=lambda: tl.query)
    base = f"{srv.url}api/jobs/{quote(tl.job_name)}"
    _, rep, _ = get(base + "/report")
    for _ in range(100):
        status, g, _ = get(base + "/goodput?points=40&window=60")
        if g["complete"]:
            break
    assert status == 200 and g["complete"]
    assert g["cumulative"][-1] == pytest.approx(rep["goodput_pct"], abs=1e-6)
    assert all(0 <= v <= 100 for v in g["rolling"] if v is not None)


def test_state_saved_in_the_background_after_the_answer(
    store: SQLiteStore, serve: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The job page's read leaves the save of the accounting's state to the server's background
    worker, which starts it once the answer went out: the store holds it soon after."""
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "always")
    tl = scenario("s4_disruption_restart")
    logger = fill(store, tl)
    srv = serve(store, clock=lambda: tl.query)
    status, d, _ = get(f"{srv.url}api/jobs/{quote(tl.job_name)}")
    assert status == 200 and d["report"]["disruptions"] == 1
    deadline = time.monotonic() + 30
    while store.load_state(logger, tl.job_name) is None and time.monotonic() < deadline:
        srv.api._warm.flush(1.0)  # waits on the worker, not on a clock
    assert store.load_state(logger, tl.job_name) is not None


def test_job_page_starts_the_read(store: SQLiteStore, serve: Any) -> None:
    """Serving a job's page starts reading the job in the background, before the page's own
    API requests; an unknown name starts nothing."""
    tl = scenario("s4_disruption_restart")
    logger = fill(store, tl)
    srv = serve(store, clock=lambda: tl.query)
    status, html, _ = get(f"{srv.url}jobs/nope")
    assert status == 200 and "<html" in html.lower()
    status, html, _ = get(f"{srv.url}jobs/{quote(tl.job_name)}")
    assert status == 200
    deadline = time.monotonic() + 30
    while (logger, tl.job_name) not in srv.api._ready and time.monotonic() < deadline:
        srv.api._warm.flush(1.0)  # waits on the worker, not on a clock
    assert srv.api._views[(logger, tl.job_name)].events == len(tl.events)
    assert set(srv.api._views) == {(logger, tl.job_name)}


def test_console_logs_say_how_many_records_were_lost(serve: Any, store: SQLiteStore) -> None:
    """The lost stream's count for a console job, read again as it grows."""
    from mlgoodput._recovery import LOSS_NAMESPACE
    from mlgoodput.events import Event, EventBatch, Kind

    store.append("mlgoodput.console", "c", EventBatch(1, 0, [Event(Kind.LOG, 1.0, 0, None, 20.0, "x", {"msg": "hi"})]))
    srv = serve(store)

    def lost(n: float, seq: int) -> None:
        ev = Event(Kind.METRIC, 2.0, 0, None, n, "console_lost_records", {"namespace": "mlgoodput.console"})
        store.append(LOSS_NAMESPACE, "c", EventBatch(9, seq, [ev]))

    assert get(srv.url + "api/console/c/logs")[1]["lost"] == 0
    lost(5, 0)
    assert get(srv.url + "api/console/c/logs")[1]["lost"] == 5
    lost(7, 1)
    assert get(srv.url + "api/console/c/logs")[1]["lost"] == 12
