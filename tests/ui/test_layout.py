"""Every page at 390 px and 1440 px in a real headless Chromium: nothing wider than the window,
every table scrolls inside a wrapper of its own, and the page's formats are `_format`'s.

Screenshots of each page at each width go to $LAYOUT_SHOTS_DIR when it names a folder.
"""

from __future__ import annotations

import base64
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from test_pages import js, open_page, sample
from ui_helpers import PUBLIC, fill, scenario

from mlgoodput._format import GOODPUT_FAIR_PCT, GOODPUT_GOOD_PCT, duration, flops_rate, goodput_level, timestamp
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore
from mlgoodput.ui import UIServer
from mlgoodput.ui._browser import Browser
from waiting import wait_for

pytestmark = pytest.mark.slow

WIDTHS = (390, 1440)
LONG_JOB = "multihost-27h"
LONG_S = 100_090.0  # 27 h 48 min
HOSTS = 8


def multihost_events(t0: float) -> list[list[Event]]:
    """Per host: a 27.8 h job of 8 hosts (host 7 slower), compilations, checkpoints, FLOPs."""
    out = []
    for h in range(HOSTS):
        ev = [
            Event(Kind.JOB_START, t0, h),
            Event(Kind.ACCEL_INIT_START, t0 + 1, h),
            Event(Kind.ACCEL_INIT_END, t0 + 40, h),
            Event(Kind.TRAINING_PREP_START, t0 + 40, h),
            Event(Kind.TRAINING_PREP_END, t0 + 300, h),
            Event(Kind.STEP_FLOPS, t0 + 300, h, value=2.4e16),
            Event(Kind.PEAK_FLOPS, t0 + 300, h, value=3.0e14, name="configured"),
            Event(Kind.COMPILE, t0 + 300, h, value=41.5, name="train_step"),
            Event(Kind.COMPILE, t0 + 400, h, value=6.25, name="eval_step"),
        ]
        t, step = t0 + 300, 0
        while t < t0 + LONG_S - 200:
            ev.append(Event(Kind.STEP_START, t, h, step=step))
            t += 100.0 + (0.9 if h == HOSTS - 1 else 0.05 * h)
            if step % 100 == 99:
                ev.append(Event(Kind.CKPT_SAVE_START, t, h, step=step))
                t += 12.5
                ev.append(Event(Kind.CKPT_SAVE_END, t, h, step=step))
            step += 1
        ev.append(Event(Kind.JOB_END, t0 + LONG_S, h))
        out.append(ev)
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One store (the public scenarios, a productivity job, an elastic job, a 27.8 h job of 8
    hosts, and the sample workload's job, console job and run) behind one server."""
    path = tmp_path_factory.mktemp("layout") / "layout.db"
    st = SQLiteStore(path)
    jobs = {}
    for name in [*PUBLIC, "p1_productivity_restart", "s9_elastic_pause"]:
        tl = scenario(name)
        fill(st, tl)
        jobs[name] = tl.job_name
    t0 = 1_795_000_000.0
    for h, ev in enumerate(multihost_events(t0)):
        st.append(f"goodput_{LONG_JOB}", LONG_JOB, EventBatch(900 + h, 0, ev))
    p = sample(path, "sample", 30, 0.02)
    assert p.wait(60) == 0, p.stderr.read() if p.stderr else ""
    run = next(j.job for j in st.jobs() if j.namespace == "mlgoodput.run")
    srv = UIServer(st, "127.0.0.1", 0)
    srv.start()
    try:
        yield {"base": srv.url.rstrip("/"), "jobs": jobs, "run": run, "store": st}
    finally:
        srv.stop()
        st.close()


def pages(site: dict[str, Any]) -> list[tuple[str, str, str]]:
    jobs = site["jobs"]
    job_ready = "document.body.dataset.jobReady && document.body.dataset.goodputComplete"
    return [
        ("jobs", "/", "document.querySelector('#jobs .goodput')"),
        ("job_restart", f"/jobs/{quote(jobs['s4_disruption_restart'])}", job_ready),
        ("job_multihost", f"/jobs/{LONG_JOB}", job_ready + " && document.querySelector('#hosts tbody tr')"),
        ("job_productivity", f"/jobs/{quote(jobs['p1_productivity_restart'])}", job_ready),
        ("job_elastic", f"/jobs/{quote(jobs['s9_elastic_pause'])}", job_ready),
        ("job_sample", "/jobs/sample", job_ready),
        ("runs", "/runs", "document.querySelector('#runs .run-link')"),
        ("run", f"/runs/{quote(site['run'])}", "document.querySelector('#metric-chart canvas')"),
        ("consoles", "/console", "document.querySelector('#consoles a')"),
        (
            "console",
            "/console/sample",
            "document.querySelector('#logs .line') && document.querySelector('#usage-chart canvas')",
        ),
        (
            "compare",
            f"/compare?job={quote(jobs['s4_disruption_restart'])}&job={LONG_JOB}&job=sample",
            "document.querySelector('#compare tbody tr') && document.querySelector('#compare-steps canvas')",
        ),
    ]


# where each table sits: its nearest ancestor that scrolls sideways, and whether anything is cut
TABLES = """
return Array.from(document.querySelectorAll('main table:not(.u-legend)')).map((t) => {
  let a = t.parentElement;
  while (a && a !== document.body && !['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) a = a.parentElement;
  const scrolls = !!a && a !== document.body;
  const r = t.getBoundingClientRect(), w = scrolls ? a.getBoundingClientRect() : r;
  return {id: t.id || t.className, scrolls, wrapRight: w.right, wrapLeft: w.left};
});
"""


def shot(b: Browser, path: Path) -> None:
    """A PNG of the whole page (beyond the window's height)."""
    h = js(b, "return document.documentElement.scrollHeight")
    w = js(b, "return window.innerWidth")
    png = b.driver.execute_cdp_cmd(
        "Page.captureScreenshot",
        {"format": "png", "captureBeyondViewport": True, "clip": {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}},
    )
    path.write_bytes(base64.b64decode(png["data"]))


@pytest.fixture
def sized(browser: Browser) -> Iterator[Browser]:
    yield browser
    browser.driver.set_window_size(1280, 900)  # the session's browser, as the other tests expect it


@pytest.mark.parametrize("width", WIDTHS)
def test_no_page_is_wider_than_the_window(width: int, site: dict[str, Any], sized: Browser) -> None:
    b = sized
    b.driver.set_window_size(width, 900)
    assert wait_for(lambda: js(b, "return window.innerWidth") == width, 5), js(b, "return window.innerWidth")
    shots = os.environ.get("LAYOUT_SHOTS_DIR")
    b.console_errors()
    for name, path, ready in pages(site):
        open_page(b, site["base"] + path, ready)
        sw = js(b, "return document.documentElement.scrollWidth")
        assert sw <= width, f"{name} at {width} px: the page is {sw} px wide"
        for t in js(b, TABLES):
            assert t["scrolls"], f"{name} at {width} px: table {t['id']} has no wrapper that scrolls"
            assert t["wrapLeft"] >= 0 and t["wrapRight"] <= width + 0.5, f"{name} at {width} px: {t} is cut"
        cut = js(
            b,
            "return Array.from(document.querySelectorAll('main .card, main canvas, main svg, main .u-legend'))"
            ".filter((e) => e.getBoundingClientRect().right > innerWidth + 0.5).map((e) => e.className || e.tagName)",
        )
        assert cut == [], f"{name} at {width} px: {cut} reach past the window"
        if shots:
            Path(shots).mkdir(parents=True, exist_ok=True)
            shot(b, Path(shots) / f"layout_{name}_{width}.png")
        assert b.console_errors() == [], name


CHART_FITS = """
const box = document.querySelector('#usage-chart'), root = box.querySelector('.uplot');
return [Math.round(root.getBoundingClientRect().width), box.clientWidth, document.documentElement.scrollWidth];
"""


def test_a_chart_follows_its_box_when_a_card_beside_it_comes_or_goes(site: dict[str, Any], sized: Browser) -> None:
    """The console's CPU chart shares a row with the progress card, and their data come in
    either order: a chart made while that card was hidden was as wide as the whole row, and
    stayed so once the card appeared (the page 2,079 px wide in a 1,440 px window). The chart
    follows its box, whatever changes the box."""
    b = sized
    b.driver.set_window_size(1440, 900)
    assert wait_for(lambda: js(b, "return window.innerWidth") == 1440, 5)
    open_page(b, site["base"] + "/console/sample", "document.querySelector('#usage-chart .uplot')")
    row_card = "document.querySelector('#usage-chart').closest('.card').parentElement.firstElementChild"
    assert js(b, f"return {row_card}.querySelector('h2').textContent") == "Progress"
    # (the page settled: both cards' data in, the chart fitted to its box)
    settled = f"return !{row_card}.hidden"
    assert wait_for(lambda: js(b, settled) and (w := js(b, CHART_FITS))[0] == w[1] and w[2] <= 1440, 10), js(
        b, CHART_FITS
    )
    narrow = js(b, CHART_FITS)
    js(b, f"{row_card}.hidden = true")  # the progress card gone: the chart takes the row
    assert wait_for(lambda: (w := js(b, CHART_FITS))[0] == w[1] > narrow[0] * 1.5, 10), js(b, CHART_FITS)
    js(b, f"{row_card}.hidden = false")  # and back
    assert wait_for(lambda: (w := js(b, CHART_FITS))[0] == w[1] == narrow[1] and w[2] <= 1440, 10), js(b, CHART_FITS)


def test_job_page_cards_colours_and_formats(site: dict[str, Any], sized: Browser) -> None:
    b = sized
    b.driver.set_window_size(1440, 900)
    base, jobs = site["base"], site["jobs"]
    ready = "document.body.dataset.jobReady && document.body.dataset.goodputComplete"
    open_page(b, f"{base}/jobs/{LONG_JOB}", ready)
    cards = js(b, "return Array.from(document.querySelectorAll('[data-card]')).map((c) => c.dataset.card)")
    assert "slices" not in cards and "disruptions" not in cards  # nothing to show: not drawn
    assert {"attempts", "hosts", "checkpoints", "compiles"} <= set(cards)
    assert js(b, "return document.querySelector('.sub').textContent").count("27 h 48 min") == 1
    text = js(b, "return document.querySelector('main').textContent")
    assert "300 TFLOP/s" in text and "e+" not in text  # the configured peak, with its SI prefix
    level = js(b, "return document.getElementById('goodput').dataset.level")
    pct = float(js(b, "return document.getElementById('goodput').firstChild.textContent"))
    assert level == goodput_level(pct)
    colour = js(b, "return getComputedStyle(document.getElementById('goodput')).color")
    assert colour == {"good": "rgb(31, 157, 85)", "fair": "rgb(220, 104, 3)", "poor": "rgb(217, 45, 32)"}[level]
    # the attempts count from 1; timestamps are UTC with the zone
    first = js(b, "return document.querySelector('#attempts tbody td').textContent")
    assert first == "1"
    start = js(b, "return document.querySelector('#attempts tbody td:nth-child(2)').textContent")
    assert start == timestamp(1_795_000_000.0)
    titles = js(b, "return charts.flatMap((u) => u.axes.map((a) => a.label))")  # drawn on the canvas
    assert {"time (UTC)", "goodput (%)", "step time (log scale)"} <= set(titles)
    open_page(b, f"{base}/jobs/{quote(jobs['s9_elastic_pause'])}", ready)
    assert js(b, "return !!document.querySelector('[data-card=slices] #slices tbody tr')")
    open_page(b, base + "/", "document.querySelector('#jobs .goodput')")
    rows = js(
        b,
        "return Array.from(document.querySelectorAll('#jobs tbody tr')).map((r) =>"
        " [r.dataset.job, r.querySelector('.goodput') && r.querySelector('.goodput').parentElement.className])",
    )
    for job, cls in rows:
        if cls:
            shown = float(
                js(b, f"return document.querySelector('#jobs tr[data-job=\"{job}\"] .goodput').textContent").split()[0]
            )
            assert cls == f"lvl-{goodput_level(shown)}", job


def test_js_formats_equal_python_formats(site: dict[str, Any], browser: Browser) -> None:
    open_page(browser, site["base"] + "/", "document.querySelector('#jobs .goodput')")
    rng = random.Random(7)
    durations = [0.0, 5.7e-4, 0.282, 0.2825, 4.27, 59.99, 59.996, 725.0, 724.5, 3599.6, 100_090.0, 0.9996, 1e-7, -3.0]
    durations += [10 ** rng.uniform(-7, 6) for _ in range(300)]
    rates = [1e11, 123e12, 999.6e9, 5.0, 1.5e3, 2e21, 0.5] + [10 ** rng.uniform(-1, 20) for _ in range(200)]
    times = [1_795_781_465.0, 0.0, 1_700_000_000.5] + [rng.uniform(1e9, 2e9) for _ in range(100)]
    got = browser.driver.execute_script(
        "const [d, r, t] = arguments; return [d.map(secs), r.map((x) => flops(x)), t.map(when)]",
        durations,
        rates,
        times,
    )
    assert got[0] == [duration(x) for x in durations]
    assert got[1] == [flops_rate(x) for x in rates]
    assert got[2] == [timestamp(x) for x in times]
    assert got[0][durations.index(100_090.0)] == "27 h 48 min"
    levels = browser.driver.execute_script(
        "return [GOODPUT_GOOD_PCT, GOODPUT_FAIR_PCT, goodputLevel(0), goodputLevel(8), goodputLevel(60), goodputLevel(95)]"
    )
    assert levels == [GOODPUT_GOOD_PCT, GOODPUT_FAIR_PCT, "poor", "poor", "fair", "good"]
