"""The fleet page (/fleet) and its API (/api/fleet) against `mlgoodput fleet --json` run as a
command: a store of jobs with known labels and sizes (one without a team, one without its
accelerators recorded, a restart, jobs cut by both edges of the range, one over midnight); the
page shows the command's numbers (in the text it prints and exactly in the data attributes its
bars and cells are drawn from), each job row opens that job's page, it refreshes live, it fits
390 px and 1440 px, and bad parameters get a 400 with one line."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_pages import open_page
from ui_helpers import get

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore
from mlgoodput.ui import UIServer
from mlgoodput.ui._browser import Browser
from waiting import wait_for

pytestmark = pytest.mark.slow

D = 1_795_046_400.0  # a UTC midnight (2026-11-19)
SINCE, UNTIL = D, D + 2 * 86400.0
RANGE = f"since={SINCE:.0f}&until={UNTIL:.0f}"
READY = "document.body.dataset.fleetReady && document.querySelector('#fleet-jobs tbody tr')"


def _labels(t: float, labels: dict[str, str], n: int | None, kind: str | None) -> Event:
    return Event(Kind.JOB_LABELS, t, value=None if n is None else float(n), name=kind, attrs={"labels": labels})


def _steps(t: float, n: int, step_s: float, first: int = 0) -> list[Event]:
    return [Event(Kind.STEP_START, t + step_s * k, step=first + k) for k in range(n)]


def jobs() -> dict[str, list[Event]]:
    """The store's jobs (every time a whole second): name -> events."""
    out = {
        # nlp, 8 H100, starts half an hour before the range
        "llama-a": [
            Event(Kind.JOB_START, D - 1800),
            _labels(D - 1800, {"team": "nlp", "model": "llama"}, 8, "H100"),
            Event(Kind.ACCEL_INIT_START, D - 1800),
            Event(Kind.ACCEL_INIT_END, D - 1790),
            *_steps(D - 1780, 3000, 2.0),
            Event(Kind.JOB_END, D + 4230),
        ],
        # vision, 4 A100: crashes after 100 steps and restarts from step 0
        "vit-b": [
            Event(Kind.JOB_START, D + 5000),
            _labels(D + 5000, {"team": "vision"}, 4, "A100"),
            *_steps(D + 5010, 100, 4.0),
            Event(Kind.JOB_START, D + 5500),
            _labels(D + 5500, {"team": "vision"}, 4, "A100"),
            *_steps(D + 5510, 200, 4.0),
            Event(Kind.JOB_END, D + 6310),
        ],
        # nlp, accelerators not recorded (counted as one)
        "noacc-c": [
            Event(Kind.JOB_START, D + 10000),
            _labels(D + 10000, {"team": "nlp"}, None, None),
            *_steps(D + 10010, 1000, 1.0),
            Event(Kind.JOB_END, D + 11020),
        ],
        # no team: the group (none)
        "bert-d": [
            Event(Kind.JOB_START, D + 20000),
            _labels(D + 20000, {"model": "bert"}, 2, "H100"),
            *_steps(D + 20005, 500, 3.0),
            Event(Kind.JOB_END, D + 21600),
        ],
        # speech, 16 H100, over midnight, with a checkpoint
        "whisper-e": [
            Event(Kind.JOB_START, D + 86400 - 3000),
            _labels(D + 86400 - 3000, {"team": "speech", "model": "whisper"}, 16, "H100"),
            *_steps(D + 86400 - 2900, 1000, 2.0),
            Event(Kind.CKPT_SAVE_START, D + 86400 - 900, step=1000),
            Event(Kind.CKPT_SAVE_END, D + 86400 - 600, step=1000),
            *_steps(D + 86400 - 600, 1000, 3.0, first=1000),
            Event(Kind.JOB_END, D + 86400 + 3000),
        ],
        # vision, 4 A100, running past the end of the range
        "late-f": [
            Event(Kind.JOB_START, UNTIL - 1000),
            _labels(UNTIL - 1000, {"team": "vision"}, 4, "A100"),
            *_steps(UNTIL - 990, 1000, 3.0),
            Event(Kind.JOB_END, UNTIL + 2020),
        ],
        # over before the range: not in it
        "old-g": [
            Event(Kind.JOB_START, D - 9000),
            _labels(D - 9000, {"team": "nlp"}, 2, "H100"),
            *_steps(D - 8990, 100, 1.0),
            Event(Kind.JOB_END, D - 8880),
        ],
    }
    return out


def put(store: SQLiteStore, writer: int, job: str, events: list[Event]) -> None:
    store.append(f"goodput_{job}", job, EventBatch(writer, 0, events))


def js(b: Browser, script: str, *args: Any) -> Any:
    return b.driver.execute_script(script, *args)


def cli_fleet(path: Path, *args: str) -> dict[str, Any]:
    """`mlgoodput fleet ... --json`, run as a command."""
    p = subprocess.run(
        [sys.executable, "-m", "mlgoodput", "fleet", "--store", str(path), "--json", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)  # type: ignore[no-any-return]


# the command's text (_cli/fleet.py): what the page prints for the same numbers
def hours(h: float | None) -> str:
    return "–" if h is None else f"{h:,.1f}" if h >= 10 else f"{h:,.2f}"


def pct(v: float | None) -> str:
    return "–" if v is None else f"{100.0 * v:.1f} %"


def money(v: float | None, cur: str) -> str:
    return "–" if v is None else f"{v:,.2f} {cur}"


def group_name(k: str | None) -> str:
    return "(none)" if k is None else k


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    path = tmp_path_factory.mktemp("fleet") / "fleet.db"
    st = SQLiteStore(path)
    for w, (job, ev) in enumerate(jobs().items(), start=1):
        put(st, w, job, ev)
    srv = UIServer(st, "127.0.0.1", 0)
    srv.start()
    try:
        yield {"base": srv.url.rstrip("/"), "path": path, "store": st}
    finally:
        srv.stop()
        st.close()


@pytest.fixture
def sized(browser: Browser) -> Iterator[Browser]:
    yield browser
    browser.driver.set_window_size(1280, 900)  # the session's browser, as the other tests expect it


CELLS = """return Array.from(document.querySelectorAll(arguments[0])).map((r) => [r.dataset[arguments[1]],
  Object.fromEntries(Array.from(r.querySelectorAll('td[data-key]')).map((c) => [c.dataset.key, [c.dataset.v, c.textContent]]))])"""


def check_cells(row: dict[str, Any], cells: dict[str, list[str]], currency: str | None) -> None:
    """Each cell shows the command's number in its text and carries it exactly in data-v."""
    fmt = {
        "jobs": str,
        "accelerators": str,
        "accelerator_hours": hours,
        "lost_hours": hours,
        "goodput": pct,
        "scheduling_goodput": pct,
        "program_goodput": pct,
        "ml_productivity_goodput": pct,
        "ettr": pct,
    }
    for key, (v, text) in cells.items():
        if key.startswith("cost."):
            assert currency is not None
            want = row["cost"][key[5:]]
            assert text == money(want, currency), key
        else:
            want = row[key]
            if key == "accelerators":
                text = text.split()[0].rstrip("?")
            assert text == fmt[key](want), (key, text, want)
        assert (None if v == "" else float(v)) == want, (key, v, want)


def test_page_shows_the_commands_numbers(site: dict[str, Any], sized: Browser) -> None:
    b = sized
    b.driver.set_window_size(1440, 1000)
    want = cli_fleet(site["path"], "--since", f"{SINCE:.0f}", "--until", f"{UNTIL:.0f}", "--by", "team")
    assert {j["job"] for j in want["jobs"]} == set(jobs()) - {"old-g"}
    status, got, _ = get(f"{site['base']}/api/fleet?{RANGE}&by=team")
    assert status == 200
    assert {k: got[k] for k in want} == want  # the API's answer is the command's report
    b.console_errors()
    open_page(b, f"{site['base']}/fleet?{RANGE}&by=team", READY)
    # the totals
    kpis = js(
        b,
        "return Object.fromEntries(Array.from(document.querySelectorAll('#fleet-total [data-key]')).map((k) => [k.dataset.key, [k.dataset.v, k.querySelector('.v').textContent]]))",
    )
    check_cells(want["total"], {k: v for k, v in kpis.items() if k != "queue_hours"}, None)
    assert float(kpis["queue_hours"][0]) == want["total"]["queue_hours"]
    assert (
        js(b, "return document.getElementById('fleet-goodput').firstChild.textContent")
        == pct(want["total"]["goodput"])[:-2]
    )
    # the groups table, most hours lost first, and its total row
    rows = js(b, CELLS, "#fleet-group-table tbody tr", "group")
    assert [name for name, _ in rows] == [group_name(g["key"]) for g in want["groups"]] + ["all"]
    for (_, cells), g in zip(rows, [*want["groups"], want["total"]], strict=True):
        check_cells(g, cells, None)
    # a stacked bar per group: a segment per bucket with hours, each its hours exactly, drawn to scale
    bars = js(
        b,
        """return Array.from(document.querySelectorAll('#fleet-groups .fleet-bar')).map((r) => [r.dataset.group, r.dataset.v,
        r.querySelector('.fb-fill').getBoundingClientRect().width,
        Array.from(r.querySelectorAll('.fb-seg')).map((s) => [s.dataset.bucket, s.dataset.hours, s.getBoundingClientRect().width])])""",
    )
    widest = max(g["accelerator_hours"] for g in want["groups"])
    full = max(w for _, _, w, _ in bars)
    for (name, v, width, segs), g in zip(bars, want["groups"], strict=True):
        assert name == group_name(g["key"]) and float(v) == g["accelerator_hours"]
        expect = {"productive": g["productive_hours"]} | {k: h for k, h in g["badput_hours"].items() if h > 0}
        assert {k: float(h) for k, h, _ in segs} == expect, name
        assert width == pytest.approx(full * g["accelerator_hours"] / widest, abs=1.0)
        for k, h, w in segs:
            assert w == pytest.approx(width * float(h) / g["accelerator_hours"], abs=1.0), (name, k)
    # the days: a column per UTC day, a rect per bucket with hours
    days = js(
        b,
        """return Array.from(document.querySelectorAll('#fleet-days g.day')).map((g) => [g.dataset.day, g.dataset.v,
        Array.from(g.querySelectorAll('rect[data-bucket]')).map((r) => [r.dataset.bucket, r.dataset.hours, r.getBoundingClientRect().height])])""",
    )
    assert [d for d, _, _ in days] == [d["day"] for d in want["days"]]
    for (_, v, rects), d in zip(days, want["days"], strict=True):
        assert float(v) == d["accelerator_hours"]
        expect = {"productive": d["productive_hours"]} | {k: h for k, h in d["badput_hours"].items() if h > 0}
        assert {k: float(h) for k, h, _ in rects} == {k: h for k, h in expect.items() if h > 0}
    # the jobs, most hours lost first, each with the command's link
    rows = js(b, CELLS, "#fleet-jobs tbody tr", "job")
    assert [name for name, _ in rows] == [j["job"] for j in want["jobs"]]
    for (_, cells), j in zip(rows, want["jobs"], strict=True):
        check_cells(j, cells, None)
    links = js(
        b, "return Array.from(document.querySelectorAll('#fleet-jobs a.job-link')).map((a) => a.getAttribute('href'))"
    )
    assert links == [j["link"] for j in want["jobs"]]
    unrecorded = js(
        b, "return document.querySelector('#fleet-jobs tr[data-job=\"noacc-c\"] td[data-key=accelerators]').textContent"
    )
    assert unrecorded == "1?"
    assert b.console_errors() == []


def test_each_job_row_opens_its_job_page(site: dict[str, Any], sized: Browser) -> None:
    b = sized
    b.driver.set_window_size(1440, 1000)
    names = [j["job"] for j in cli_fleet(site["path"], "--since", f"{SINCE:.0f}", "--until", f"{UNTIL:.0f}")["jobs"]]
    for name in names:
        open_page(b, f"{site['base']}/fleet?{RANGE}&by=team", READY)
        b.driver.find_element("css selector", f'#fleet-jobs tr[data-job="{name}"] a.job-link').click()
        assert wait_for(
            lambda: js(b, "return location.pathname.startsWith('/jobs/') && !!document.body.dataset.jobReady"), 30
        ), (name, b.console_errors())
        assert js(b, "return document.querySelector('main h1').textContent") == name
        assert js(b, "return new URLSearchParams(location.search).get('logger')") == f"goodput_{name}"
        head = js(b, "return document.querySelector('.sub').textContent")
        assert f"goodput_{name}" in head
    # and the other pages link to the fleet page
    open_page(b, site["base"] + "/", "document.querySelector('#jobs .goodput')")
    b.driver.find_element("css selector", "header nav a[data-nav=fleet]").click()
    assert wait_for(lambda: js(b, "return location.pathname === '/fleet' && !!document.body.dataset.fleetReady"), 30)
    assert js(b, "return document.querySelector('header nav a.on').dataset.nav") == "fleet"


def test_priced_and_by_another_label(site: dict[str, Any], sized: Browser) -> None:
    b = sized
    b.driver.set_window_size(1440, 1000)
    args = ("--since", f"{SINCE:.0f}", "--until", f"{UNTIL:.0f}", "--by", "model", "--price-per-hour", "2.5")
    want = cli_fleet(site["path"], *args)
    assert want["currency"] == "USD"
    open_page(b, f"{site['base']}/fleet?{RANGE}&by=model&price_per_hour=2.5", READY)
    rows = js(b, CELLS, "#fleet-group-table tbody tr", "group")
    assert [name for name, _ in rows] == [group_name(g["key"]) for g in want["groups"]] + ["all"]
    for (_, cells), g in zip(rows, [*want["groups"], want["total"]], strict=True):
        assert "cost.lost" in cells and "cost.total" in cells
        check_cells(g, cells, "USD")
    rows = js(b, CELLS, "#fleet-jobs tbody tr", "job")
    for (_, cells), j in zip(rows, want["jobs"], strict=True):
        check_cells(j, cells, "USD")
    # the controls say what was asked, and a new grouping asked from them is the command's too
    assert js(b, "return document.getElementById('fleet-by').value") == "model"
    assert js(
        b, "return [document.getElementById('fleet-since').value, document.getElementById('fleet-until').value]"
    ) == [
        "2026-11-19",
        "2026-11-20",
    ]
    ready = js(b, "return document.body.dataset.fleetReady")
    js(b, "const s = document.getElementById('fleet-by'); s.value = 'job'; s.dispatchEvent(new Event('change'))")
    assert wait_for(
        lambda: (
            js(b, "return document.body.dataset.fleetReady") != ready
            and js(b, "return document.querySelector('#fleet-group-table tbody tr').dataset.group") != "(none)"
        )
    )
    by_job = cli_fleet(
        site["path"], "--since", f"{SINCE:.0f}", "--until", f"{UNTIL:.0f}", "--by", "job", "--price-per-hour", "2.5"
    )
    assert js(b, "return new URLSearchParams(location.search).get('by')") == "job"
    rows = js(b, CELLS, "#fleet-group-table tbody tr", "group")
    assert [name for name, _ in rows] == [g["key"] for g in by_job["groups"]] + ["all"]


def test_page_is_live(tmp_path: Path, browser: Browser, serve: Any) -> None:
    st = SQLiteStore(tmp_path / "live.db")
    try:
        ev = jobs()
        put(st, 1, "llama-a", ev["llama-a"])
        srv = serve(st)
        open_page(browser, f"{srv.url}fleet?{RANGE}&by=team", READY)
        assert js(browser, "return document.querySelector('#fleet-total [data-key=jobs]').dataset.v") == "1"
        put(st, 2, "vit-b", ev["vit-b"])  # a job stored while the page is open appears on its own
        assert wait_for(
            lambda: js(browser, "return document.querySelector('#fleet-total [data-key=jobs]').dataset.v") == "2", 20
        ), "the page never showed the new job"
        assert js(browser, "return !!document.querySelector('#fleet-jobs tr[data-job=\"vit-b\"]')")
    finally:
        st.close()


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ("since=yesterday", "since must be"),
        ("until=2026-13-45", "until must be"),
        (f"since={UNTIL:.0f}&until={SINCE:.0f}", "until must be after since"),
        ("since=nan", "since must be a finite time"),
        ("until=1e300", "until:"),
        ("price_per_hour=-1", "price_per_hour must be"),
        ("price_per_hour=abc", "price_per_hour must be a number"),
        ("price_per_hour=inf", "price_per_hour must be"),
        ("top=many", "top must be an integer"),
        ("top=-3", "top must be >= 0"),
        ("by=" + "x" * 300, "by must be"),
        ("by=te%0Aam", "by must be"),
    ],
)
def test_bad_parameters_get_a_clear_400(query: str, says: str, site: dict[str, Any]) -> None:
    status, body, headers = get(f"{site['base']}/api/fleet?{query}")
    assert status == 400, body
    assert headers["Content-Type"].startswith("application/json")
    assert isinstance(body, dict) and list(body) == ["error"] and says in body["error"], body
    assert "Traceback" not in body["error"] and "\n" not in body["error"]


def test_page_says_what_is_wrong_with_its_parameters(site: dict[str, Any], browser: Browser) -> None:
    open_page(browser, f"{site['base']}/fleet?since=yesterday", "document.body.dataset.fleetError")
    text = js(browser, "return document.getElementById('fleet-error').textContent")
    assert text.startswith("since must be") and not js(browser, "return document.getElementById('fleet-error').hidden")
    assert js(browser, "return !!document.getElementById('fleet-by')")  # the controls stay, to fix it
    # a range the controls make wrong: said, and the last range's figures are gone; made right again: back
    open_page(browser, f"{site['base']}/fleet?{RANGE}", READY)
    pick = (
        "const i = document.getElementById('fleet-since'); i.value = arguments[0]; i.dispatchEvent(new Event('change'))"
    )
    js(browser, pick, "2026-11-25")
    assert wait_for(
        lambda: js(browser, "return document.body.dataset.fleetError || ''").startswith("until must be after")
    )
    assert not js(browser, "return !!document.querySelector('#fleet-jobs')")
    js(browser, pick, "2026-11-19")
    assert wait_for(
        lambda: js(browser, "return !document.body.dataset.fleetError && !!document.querySelector('#fleet-jobs')")
    )
    assert js(browser, "return new URLSearchParams(location.search).get('since')") == "2026-11-19"
    browser.console_errors()  # the 400 itself is logged by the browser


def test_top_and_defaults(site: dict[str, Any]) -> None:
    status, got, _ = get(f"{site['base']}/api/fleet?{RANGE}&top=2")
    assert status == 200 and got["by"] == "team" and got["jobs_total"] == 6 and len(got["jobs"]) == 2
    status, full, _ = get(f"{site['base']}/api/fleet?{RANGE}")
    assert full["jobs"][:2] == got["jobs"] and "jobs_total" not in full
    # no range: the command's default, the last 7 days up to now from the start of that hour
    status, now, _ = get(f"{site['base']}/api/fleet")
    assert status == 200 and now["until"] == pytest.approx(now["now"], abs=5)
    assert now["since"] % 3600 == 0 and now["until"] - now["since"] >= 7 * 86400
    # a date means that UTC midnight
    status, day, _ = get(f"{site['base']}/api/fleet?since=2026-11-19&until=2026-11-21T00:00:00")
    assert (day["since"], day["until"]) == (SINCE, UNTIL)


def test_js_fixed_equals_pythons_format(site: dict[str, Any], browser: Browser) -> None:
    open_page(browser, site["base"] + "/fleet?" + RANGE, READY)
    xs = [
        0.0,
        0.25,
        0.75,
        0.125,
        0.375,
        2.5,
        12.25,
        12.75,
        1234.25,
        1.005,
        9.995,
        9.999,
        10.0,
        1e6 + 0.25,
        -0.25,
        1234567.891,
    ]
    xs += [k / 8 for k in range(0, 200)] + [k / 7 for k in range(0, 200)]
    got = browser.driver.execute_script(
        "return [arguments[0].map(fleetHours), arguments[0].map(fleetPct), arguments[0].map((x) => fleetMoney(x, 'EUR'))]",
        xs,
    )
    assert got[0] == [hours(x) for x in xs]
    assert got[1] == [pct(x) for x in xs]
    assert got[2] == [money(x, "EUR") for x in xs]


TABLES = """return Array.from(document.querySelectorAll('main table')).map((t) => {
  let a = t.parentElement;
  while (a && a !== document.body && !['auto', 'scroll'].includes(getComputedStyle(a).overflowX)) a = a.parentElement;
  const w = a && a !== document.body ? a.getBoundingClientRect() : t.getBoundingClientRect();
  return [t.id, !!a && a !== document.body, w.left, w.right];
});"""


@pytest.mark.parametrize("width", [390, 1440])
def test_page_fits_the_window(width: int, site: dict[str, Any], sized: Browser) -> None:
    b = sized
    b.driver.set_window_size(width, 900)
    assert wait_for(lambda: js(b, "return window.innerWidth") == width, 5)
    open_page(b, f"{site['base']}/fleet?{RANGE}&by=team&price_per_hour=2.5", READY)
    assert wait_for(
        lambda: (
            js(b, "return document.querySelector('#fleet-days svg').getAttribute('width')")
            == str(int(js(b, "return Math.max(240, document.getElementById('fleet-days').clientWidth)")))
        ),
        5,
    )
    assert js(b, "return document.documentElement.scrollWidth") <= width
    for tid, scrolls, left, right in js(b, TABLES):
        assert scrolls and left >= 0 and right <= width + 0.5, (tid, left, right)
    cut = js(
        b,
        "return Array.from(document.querySelectorAll('main .card, main svg, main .fleet-bar, main .fb-value, main .fb-label, main .legend span'))"
        ".filter((e) => e.getBoundingClientRect().right > innerWidth + 0.5).map((e) => e.className || e.tagName)",
    )
    assert cut == []
    # each group's name and figures are on the screen whole, not over each other
    for name, lab, val in js(
        b,
        """return Array.from(document.querySelectorAll('.fleet-bar')).map((r) => [r.dataset.group,
        r.querySelector('.fb-label').getBoundingClientRect().toJSON(), r.querySelector('.fb-value').getBoundingClientRect().toJSON()])""",
    ):
        assert lab["right"] <= val["left"] + 0.5 or lab["bottom"] <= val["top"] + 0.5, name
    shots = os.environ.get("FLEET_SHOTS_DIR")
    if shots:
        h = js(b, "return document.documentElement.scrollHeight")
        png = b.driver.execute_cdp_cmd(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": width, "height": h, "scale": 1},
            },
        )
        Path(shots).mkdir(parents=True, exist_ok=True)
        (Path(shots) / f"fleet_{width}.png").write_bytes(base64.b64decode(png["data"]))
