"""The runs pages: the API's incremental run reads (the points after a cursor, the listing's
status and last values, a long run reduced, CSV), and in a headless Chromium a run page
that shows new points within 5 s while the run records, every metric with loss first, the
runs table's sorting, filter and compare, the page state in the URL, and no horizontal
overflow at 390 and 1440 px."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from test_pages import js, open_page
from ui_helpers import get

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore
from mlgoodput.ui._browser import Browser
from waiting import wait_for

NS = "mlgoodput.run"
T0 = 1_700_000_000.0
_writers = iter(range(100, 10**6))


def put(store: SQLiteStore, run: str, events: list[Event]) -> None:
    store.append(NS, run, EventBatch(next(_writers), 0, events))


def a_run(
    store: SQLiteStore, name: str, configs: dict[str, Any], steps: int, *, t0: float = T0, end: bool = True
) -> None:
    ev = [Event(Kind.RUN_START, t0, attrs={"configs": configs, "alive_s": 10.0, "provenance": {"user": "ada"}})]
    for s in range(steps):
        ev.append(Event(Kind.METRIC, t0 + 1 + s, step=s, value=2.0 / (s + 1), name="loss"))
        ev.append(Event(Kind.METRIC, t0 + 1 + s, step=s, value=s / steps, name="accuracy"))
        ev.append(Event(Kind.METRIC, t0 + 1 + s, step=s, value=1e-3, name="lr"))
    if end:
        ev.append(Event(Kind.RUN_CONFIG, t0 + steps + 2, attrs={"run_phase": "COMPLETED"}))
    put(store, name, ev)


# -- the API ----------------------------------------------------------------------------------
def test_points_after_a_cursor_are_only_the_new_ones(store: SQLiteStore, serve: Any) -> None:
    a_run(store, "r1", {"lr": 0.1}, 10, t0=time.time() - 20, end=False)
    srv = serve(store)
    _, d, _ = get(srv.url + "api/runs/r1?width=300")
    assert d["status"] == "running" and d["metrics"]["loss"]["count"] == 10
    assert d["metric_order"][0] == "loss"
    cursor = d["cursor"]
    _, p, _ = get(f"{srv.url}api/runs/r1/points?after={cursor}")
    assert not p["reset"] and p["metrics"] == {} and p["cursor"] == cursor  # nothing new
    now = time.time()
    put(store, "r1", [Event(Kind.METRIC, now, step=s, value=0.1, name="loss") for s in (10, 11)])
    put(store, "r1", [Event(Kind.METRIC, now, step=0, value=7.0, name="new_metric")])
    _, p, _ = get(f"{srv.url}api/runs/r1/points?after={cursor}")
    assert p["metrics"]["loss"]["step"] == {"x": [10.0, 11.0], "y": [0.1, 0.1]}
    assert p["metrics"]["new_metric"]["step"]["y"] == [7.0]
    assert "accuracy" not in p["metrics"] and p["cursor"] != cursor
    _, again, _ = get(f"{srv.url}api/runs/r1/points?after={p['cursor']}")
    assert again["metrics"] == {}
    _, unknown, _ = get(f"{srv.url}api/runs/r1/points?after=987654")
    assert unknown["reset"] is True  # a cursor this server never gave: load the run again
    assert get(srv.url + "api/runs/nope/points?after=0")[0] == 404


def test_listing_has_status_duration_last_values_and_configs(store: SQLiteStore, serve: Any) -> None:
    a_run(store, "done", {"lr": 0.1, "model": {"layers": 2}}, 5)
    a_run(store, "live", {"lr": 0.2}, 3, t0=time.time() - 10, end=False)
    srv = serve(store)
    _, d, _ = get(srv.url + "api/runs")
    rows = {r["name"]: r for r in d["runs"]}
    assert rows["done"]["status"] == "finished" and rows["done"]["duration_s"] == 5 + 2
    assert rows["done"]["last"]["loss"] == {"value": 2.0 / 5, "step": 4, "time": T0 + 5}
    assert rows["done"]["configs"] == {"lr": 0.1, "model": {"layers": 2}}
    assert rows["done"]["metrics"] == ["loss", "accuracy", "lr"]
    assert rows["live"]["status"] == "running" and rows["live"]["user"] == "ada"
    put(store, "done", [Event(Kind.METRIC, T0 + 3, step=99, value=0.01, name="loss")])
    _, d, _ = get(srv.url + "api/runs")  # read incrementally: the new value is there
    assert {r["name"]: r for r in d["runs"]}["done"]["last"]["loss"]["step"] == 99


@pytest.mark.slow
def test_a_long_run_is_reduced_to_the_screen(store: SQLiteStore, serve: Any) -> None:
    n = 100_000
    names = [f"m{i}" for i in range(5)]
    ev = [Event(Kind.RUN_START, T0)]
    ev += [
        Event(Kind.METRIC, T0 + s * 0.01, step=s, value=math.sin(s / 500) + k, name=m)
        for s in range(n)
        for k, m in enumerate(names)
    ]
    ev[1 + 777 * 5] = Event(Kind.METRIC, T0 + 7.77, step=777, value=50.0, name="m0")  # a spike
    put(store, "long", ev)
    srv = serve(store)
    t = time.monotonic()
    status, d, _ = get(srv.url + "api/runs/long?width=600")
    took = time.monotonic() - t
    assert status == 200
    for m in names:
        s = d["metrics"][m]
        assert s["count"] == n and len(s["step"]["x"]) <= 2 * 600 and len(s["time"]["x"]) <= 2 * 600
    assert d["metrics"]["m0"]["max"] == 50.0 and 50.0 in d["metrics"]["m0"]["step"]["y"]  # the spike is kept
    assert took < 30, took


def test_reduction_is_the_same_kind_of_line_with_and_without_numpy(numpy_mode: str) -> None:
    from mlgoodput import _numpy
    from mlgoodput.ui._runs import Series

    _numpy.reset()
    s = Series()
    for i in range(20_000):
        s.add(i if i != 5_000 else None, math.nan if i == 7 else math.cos(i / 100), T0 + i)
    s.add(3, 99.0, T0 + 30_000)  # a step again (a restart): the step axis is sorted again
    r = s.reduced(200)
    assert r["count"] == 20_001 and r["max"] == 99.0 and r["min"] == min(math.cos(i / 100) for i in range(8, 20_000))
    assert 200 <= len(r["time"]["x"]) <= 400 and len(r["step"]["x"]) <= 400
    assert r["step"]["x"] == sorted(r["step"]["x"]) and 99.0 in r["step"]["y"]
    assert r["time"]["x"] == sorted(r["time"]["x"]) and r["time"]["y"][-1] == 99.0
    assert r["last"] == 99.0 and r["last_step"] == 3
    _numpy.reset()


def test_csv_has_every_point(store: SQLiteStore, serve: Any) -> None:
    a_run(store, "c", {}, 4)
    put(store, "c", [Event(Kind.METRIC, T0 + 50, value=3.5, name="=cmd|' /C calc'!A0")])  # no step; a formula
    srv = serve(store)
    status, text, headers = get(srv.url + "api/runs/c/csv")
    assert status == 200 and headers["Content-Type"].startswith("text/csv")
    assert 'filename="c-metrics.csv"' in headers["Content-Disposition"]
    lines = text.strip().split("\n")
    assert lines[0] == "metric,step,time,value" and len(lines) == 1 + 4 * 3 + 1
    assert lines[1].startswith("loss,0,") and lines[1].endswith(",2.0")
    assert "'=cmd|' /C calc'!A0,,1700000050.000000,3.5" in lines  # never run as a spreadsheet formula
    _, only, _ = get(srv.url + "api/runs/c/csv?metric=lr")
    assert {ln.split(",")[0] for ln in only.strip().split("\n")[1:]} == {"lr"}


# -- the pages ---------------------------------------------------------------------------------


@pytest.fixture
def sized(browser: Browser) -> Iterator[Browser]:
    """The session's browser on a blank page (an earlier test's page and its timers gone, its
    console errors drained), back at its own size after the test."""
    browser.driver.get("about:blank")
    browser.console_errors()
    yield browser
    browser.driver.set_window_size(1280, 900)


RECORDER = """
import sys, time
from mlgoodput.diagnostics import machinelearning_run, metrics
run = machinelearning_run(name="watched", store=sys.argv[1], configs={"lr": 0.01})
for s in range(int(sys.argv[2])):
    metrics.record("loss", 1.0 / (s + 1), step=s)
    metrics.record("accuracy", s / 1000, step=s)
    time.sleep(0.05)
run.end()
"""


def last_stored_step(store: SQLiteStore, run: str) -> int:
    cols = store.read(NS, run).columns
    steps = [
        cols.steps[i]
        for i in range(len(cols))
        if cols.kinds[i] == Kind.METRIC and cols.names and cols.names[i] == "loss"
    ]
    return max(steps, default=-1)


@pytest.mark.slow
def test_a_run_page_shows_new_points_within_5_s_while_the_run_records(
    tmp_path: Path, sized: Browser, serve: Any
) -> None:
    b = sized
    path = tmp_path / "live.db"
    st = SQLiteStore(path)
    srv = serve(st)
    p = subprocess.Popen([sys.executable, "-c", RECORDER, str(path), "400"], stderr=subprocess.PIPE)
    try:
        name = wait_for(lambda: next((j.job for j in st.jobs() if j.namespace == NS), None), 30, "the run in the store")
        wait_for(lambda: last_stored_step(st, name) >= 5, 30, "the first points")
        open_page(
            b,
            f"{srv.url}runs/{quote(name)}",
            "document.body.dataset.runReady && document.querySelector('[data-metric=\"loss\"] canvas')",
        )
        js(b, "window.__sameDocument = 1")
        assert not js(b, "return document.getElementById('live').hidden")
        page_step = "return Number(document.querySelector('[data-metric=\"loss\"]').dataset.lastStep || -1)"
        seen = []
        for _ in range(3):
            stored = last_stored_step(st, name)  # what the store holds now
            t = time.monotonic()
            assert wait_for(lambda s=stored: js(b, page_step) >= s, 5.0), (stored, js(b, page_step))
            seen.append(time.monotonic() - t)
            wait_for(lambda s=stored: last_stored_step(st, name) >= s + 20, 30, "more points")
        assert js(b, "return window.__sameDocument") == 1  # drawn in place, not reloaded
        assert js(b, "return document.querySelectorAll('[data-metric=\"accuracy\"] canvas').length") == 1
    finally:
        assert p.wait(120) == 0, p.stderr.read() if p.stderr else ""
    assert wait_for(
        lambda: js(b, "return document.querySelector('#run-status [data-status]').dataset.status") == "finished", 10
    )
    assert js(b, page_step) == 399  # the last point arrived too
    assert b.console_errors() == []
    st.close()


@pytest.mark.slow
def test_every_metric_is_charted_loss_first_and_the_state_is_in_the_url(
    store: SQLiteStore, sized: Browser, serve: Any
) -> None:
    a_run(store, "r", {"lr": 0.1}, 30)
    srv = serve(store)
    b = sized
    open_page(b, srv.url + "runs/r", "document.body.dataset.runReady")
    tiles = js(
        b, "return Array.from(document.querySelectorAll('#metric-charts .metric-tile')).map((t) => t.dataset.metric)"
    )
    assert tiles == ["loss", "accuracy", "lr"]
    assert js(b, "return document.querySelectorAll('#metric-charts canvas').length") == 3
    # the view's controls write the URL; the URL opens the same view
    js(b, "const s = document.getElementById('metric-x'); s.value = 'time'; s.dispatchEvent(new Event('change'))")
    js(b, "const l = document.getElementById('log-y'); l.checked = true; l.dispatchEvent(new Event('change'))")
    js(b, "const r = document.getElementById('smoothing'); r.value = '0.6'; r.dispatchEvent(new Event('input'))")
    js(b, "const f = document.getElementById('metric-filter'); f.value = 'acc'; f.dispatchEvent(new Event('input'))")
    url = b.driver.current_url
    assert "x=time" in url and "log=1" in url and "smooth=0.60" in url and "metrics=acc" in url
    open_page(b, url, "document.body.dataset.runReady")
    assert js(b, "return document.getElementById('metric-x').value") == "time"
    assert js(b, "return document.getElementById('log-y').checked") is True
    assert js(b, "return document.getElementById('smoothing').value") == "0.6"
    assert js(b, "return Array.from(document.querySelectorAll('.metric-tile')).map((t) => t.dataset.metric)") == [
        "accuracy"
    ]
    assert js(b, "return document.getElementById('csv').getAttribute('href')") == "/api/runs/r/csv"
    # the zoom window: from the URL onto every chart, and back out with "reset zoom"
    open_page(b, srv.url + "runs/r?from=5&to=15", "document.body.dataset.runReady")
    scales = "return charts.map((u) => [u.scales.x.min, u.scales.x.max])"
    assert js(b, scales) == [[5, 15]] * 3
    js(b, "document.getElementById('reset-zoom').click()")
    assert js(b, scales) == [[0, 29]] * 3 and "from=" not in b.driver.current_url
    assert b.console_errors() == []


@pytest.mark.slow
def test_runs_table_sorts_filters_and_compares_any_number(store: SQLiteStore, sized: Browser, serve: Any) -> None:
    for i, lr in enumerate((0.3, 0.1, 0.2)):
        a_run(store, f"sweep-{i}", {"lr": lr, "batch": 64}, 5 + i, t0=T0 + i)
    srv = serve(store)
    b = sized
    open_page(b, srv.url + "runs", "document.body.dataset.runsReady")
    names = "return Array.from(document.querySelectorAll('#runs tbody tr')).map((r) => r.dataset.run)"
    assert js(b, names) == ["sweep-2", "sweep-1", "sweep-0"]  # newest first
    heads = js(b, "return Array.from(document.querySelectorAll('#runs th')).map((t) => t.textContent)")
    assert "status" in heads and "duration" in heads and "loss" in heads and "lr" in heads  # lr differs: shown
    assert "batch" not in heads  # the same in every run: not a default column
    js(b, "document.querySelector('#runs th[data-sort=\"c:lr\"]').click()")
    assert js(b, names) == ["sweep-1", "sweep-2", "sweep-0"]  # by lr, ascending
    assert "sort=c%3Alr" in b.driver.current_url
    js(b, "const f = document.getElementById('runs-filter'); f.value = 'lr=0.3'; f.dispatchEvent(new Event('input'))")
    assert js(b, names) == ["sweep-0"]
    js(b, "const f = document.getElementById('runs-filter'); f.value = ''; f.dispatchEvent(new Event('input'))")
    for n in ("sweep-0", "sweep-1", "sweep-2"):
        js(b, f"document.querySelector('#runs tr[data-run=\"{n}\"] .run-pick').click()")
    js(b, "document.getElementById('compare-runs').click()")
    wait_for(
        lambda: js(b, "return !!document.body.dataset.runReady && !!document.querySelector('#compare-runs')"),
        20,
        "the compare page",
    )
    url = b.driver.current_url
    assert url.count("compare=") == 3
    assert js(b, "return document.querySelectorAll('#compare-runs tbody tr').length") == 3
    assert js(b, "return Array.from(document.querySelectorAll('#configs tbody tr')).map((r) => r.dataset.key)") == [
        "lr"
    ]
    legend = "return document.querySelector('[data-metric=\"loss\"]') && document.querySelector('[data-metric=\"loss\"] canvas') !== null"
    assert js(b, legend)
    open_page(b, url, "document.body.dataset.runReady && document.querySelector('#compare-runs')")  # the URL alone
    assert js(b, "return document.querySelectorAll('#compare-runs tbody tr').length") == 3
    assert b.console_errors() == []


@pytest.mark.slow
@pytest.mark.parametrize("width", [390, 1440])
def test_no_horizontal_overflow(width: int, store: SQLiteStore, sized: Browser, serve: Any) -> None:
    long_cfg = {f"a_rather_long_config_key_{i}": "a long value " * 4 for i in range(8)}
    for i in range(3):
        a_run(store, f"a-run-with-a-long-name-{i}-20261127-101010-abcd", dict(long_cfg, lr=i), 20, t0=T0 + i)
    put(
        store,
        "a-run-with-a-long-name-0-20261127-101010-abcd",
        [Event(Kind.RUN_START, T0, attrs={"provenance": {"command": "python " + "x" * 300}})],
    )
    srv = serve(store)
    b = sized
    b.driver.set_window_size(width, 900)
    names = [f"a-run-with-a-long-name-{i}-20261127-101010-abcd" for i in range(3)]
    pages = [
        ("runs", "document.body.dataset.runsReady"),
        ("runs/" + quote(names[0]), "document.body.dataset.runReady"),
        (
            "runs?" + "&".join("compare=" + quote(n) for n in names),
            "document.body.dataset.runReady && document.querySelector('#compare-runs')",
        ),
    ]
    for path, ready in pages:
        open_page(b, srv.url + path, ready)
        sw, iw = js(b, "return [document.documentElement.scrollWidth, window.innerWidth]")
        assert iw == width and sw <= iw, (path, sw, iw)
        wrapped = js(
            b,
            "return Array.from(document.querySelectorAll('main table')).map((t) => getComputedStyle(t.parentElement).overflowX)",
        )
        assert wrapped and all(o in ("auto", "scroll") for o in wrapped), (path, wrapped)
    assert b.console_errors() == []
