"""The pages in a real headless Chromium (Debian's, through its chromedriver) against a real
server over a real store: no console errors, the job page's numbers are `report --json`'s,
one timeline segment per attempt phase, live updates, escaping and the token."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from test_api import cli_report, report_seconds
from ui_helpers import PUBLIC, fill, get, scenario

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore
from mlgoodput.ui._browser import Browser
from waiting import wait_for

pytestmark = pytest.mark.slow


def js(b: Browser, script: str) -> Any:
    return b.driver.execute_script(script)


def open_page(b: Browser, url: str, ready: str, timeout_s: float = 20.0) -> None:
    b.driver.get(url)
    assert wait_for(lambda: js(b, f"return !!({ready})"), timeout_s), (
        f"{url}: {ready} never held; errors {b.console_errors()}"
    )


# Counts the page's requests still open: a fetch until it settles, a body until it is read,
# each let go a task later so the page's own continuation (which may log an error) runs first.
FETCHING_JS = """(() => {
  let open = 0;
  const close = () => setTimeout(() => { open -= 1; }, 0);
  const track = (p) => { open += 1; p.then(close, close); return p; };
  const fetch0 = window.fetch;
  window.fetch = function (...args) { return track(fetch0.apply(this, args)); };
  for (const m of ["json", "text", "arrayBuffer", "blob"]) {
    const read = Response.prototype[m];
    Response.prototype[m] = function (...args) { return track(read.apply(this, args)); };
  }
  window.mlgoodputTestFetching = () => open;
})();"""


def settled(b: Browser) -> bool:
    """True once the page loaded all it asked for and no fetch or body read is open."""
    return bool(js(b, "return document.readyState === 'complete' && window.mlgoodputTestFetching() === 0"))


def sample(store_path: Path, job: str, steps: int, step_s: float) -> subprocess.Popen[bytes]:
    """The sample workload (goodput, console, run) recording into the store, in its own process."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlgoodput._demo.workload_ui",
            "--store",
            str(store_path),
            "--job",
            job,
            "--steps",
            str(steps),
            "--step-s",
            str(step_s),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def test_every_page_loads_without_console_errors(tmp_path: Path, browser: Browser, serve: Any) -> None:
    path = tmp_path / "all.db"
    st = SQLiteStore(path)
    tl = scenario("s4_disruption_restart")
    fill(st, tl)
    p = sample(path, "sample", 30, 0.02)
    assert p.wait(60) == 0, p.stderr.read() if p.stderr else ""
    srv = serve(st)
    base = srv.url.rstrip("/")
    run = next(j.job for j in st.jobs() if j.namespace == "mlgoodput.run")
    pages = [
        ("/", "document.querySelector('#jobs .goodput')"),
        (
            f"/jobs/{quote(tl.job_name)}",
            "document.body.dataset.jobReady && document.querySelector('#steps-chart canvas')",
        ),
        ("/jobs/sample", "document.body.dataset.jobReady && document.querySelector('#timeline rect.seg')"),
        ("/runs", "document.querySelector('#runs .run-link')"),
        (f"/runs/{quote(run)}", "document.querySelector('#metric-chart canvas') && document.querySelector('#configs')"),
        ("/console", "document.querySelector('#consoles a')"),
        ("/console/sample", "document.querySelector('#logs .line') && document.querySelector('#usage-chart canvas')"),
        (f"/compare?job={quote(tl.job_name)}&job=sample", "document.querySelector('#compare tbody tr')"),
    ]
    browser.console_errors()
    hook = browser.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": FETCHING_JS})
    try:
        for path_, ready in pages:
            open_page(browser, base + path_, ready)
            wait_for(lambda: settled(browser), what=f"{path_}: the fetches it made once drawn")
            assert browser.console_errors() == [], path_
    finally:
        browser.driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", hook)
    st.close()


@pytest.mark.parametrize("name", PUBLIC)
def test_job_page_numbers_equal_report_json(name: str, store: SQLiteStore, browser: Browser, serve: Any) -> None:
    tl = scenario(name)
    fill(store, tl)
    srv = serve(store, clock=lambda: tl.query)
    want = cli_report(store.url, tl.job_name, tl.query)
    open_page(browser, f"{srv.url}jobs/{quote(tl.job_name)}", "document.querySelector('#breakdown tbody tr')")
    browser.driver.find_element("id", "zeros").click()
    assert (
        js(browser, "return document.getElementById('goodput').firstChild.textContent") == f"{want['goodput_pct']:.2f}"
    )
    rows = js(
        browser,
        """return Array.from(document.querySelectorAll('#breakdown tbody tr')).map(
        (r) => [r.dataset.bucket, r.querySelector('.seconds').textContent, r.querySelector('.pct').textContent])""",
    )
    got = {k: (float(s.replace(",", "")), float(p)) for k, s, p in rows}
    expect: dict[str, tuple[float, float]] = {"productive": (want["productive_s"], want["goodput_pct"])}
    for k, v in want["badput_s"].items():
        if isinstance(v, dict):
            for n, s in v.items():
                expect[f"{k}:{n}"] = (s, want["badput_pct"][k][n])
        else:
            expect[k] = (v, want["badput_pct"][k])
    assert set(got) == set(expect)
    for k, (s, p) in expect.items():
        assert got[k] == (round(s, 2), round(p, 2)), k
    kpi = js(browser, "return document.querySelector('[data-kpi=\"disruptions\"] .v').textContent")
    assert kpi == str(want["disruptions"])


@pytest.mark.parametrize("name", ["s4_disruption_restart", "s3_checkpoint_save_restore"])
def test_timeline_draws_the_breakdown(name: str, store: SQLiteStore, browser: Browser, serve: Any) -> None:
    """The drawn timeline is the breakdown table laid out in time: per bucket, the seconds its
    rectangles stand for equal the table's, their widths are in proportion, and nothing is red
    where the report counts no stall."""
    tl = scenario(name)
    fill(store, tl)
    srv = serve(store, clock=lambda: tl.query)
    open_page(browser, f"{srv.url}jobs/{quote(tl.job_name)}", "document.querySelector('#timeline rect.seg')")
    segs = js(
        browser,
        "return Array.from(document.querySelectorAll('#timeline rect.seg')).map((r) =>"
        " [r.dataset.bucket, Number(r.dataset.seconds), r.width.baseVal.value, r.getAttribute('fill')])",
    )
    want = report_seconds(cli_report(store.url, tl.job_name, tl.query))
    got: dict[str, float] = {}
    for b, sec, _, _ in segs:
        got[b] = got.get(b, 0.0) + sec
    assert set(got) == {k for k, v in want.items() if v > 1e-9}
    for k, v in want.items():
        assert got.get(k, 0.0) == pytest.approx(v, abs=1e-6), k
    per_s = [w / sec for _, sec, w, _ in segs if sec > 0.05 * tl_span(want)]
    assert max(per_s) == pytest.approx(min(per_s), rel=1e-3)  # one scale: widths are the seconds
    stall_red = js(browser, "return BUCKET_COLORS.stall")
    red = [b for b, _, _, fill_ in segs if fill_ == stall_red]
    assert (len(red) > 0) == (want.get("stall", 0.0) > 0)
    legend = js(
        browser,
        "return Array.from(document.querySelectorAll('#timeline + .legend [data-bucket]')).map((x) => x.dataset.bucket)",
    )
    assert set(legend) == set(got)


def tl_span(want: dict[str, float]) -> float:
    return sum(want.values())


def test_live_page_updates_while_a_workload_records(tmp_path: Path, browser: Browser, serve: Any) -> None:
    path = tmp_path / "live.db"
    st = SQLiteStore(path)
    srv = serve(st)
    p = sample(path, "live", 150, 0.05)
    try:
        assert wait_for(lambda: any(j.job == "live" and j.namespace == "goodput_live" for j in st.jobs()), 30)
        open_page(browser, srv.url + "jobs/live", "document.body.dataset.jobReady")
        assert js(browser, "return document.querySelector('[data-status]').dataset.status") == "running"
        assert not js(browser, "return document.getElementById('live').hidden")

        def last_step() -> int:
            t = js(browser, "return document.querySelector('[data-kpi=\"last step\"] .v').textContent")
            return -1 if t == "–" else int(t.replace(",", ""))

        first = last_step()
        js(browser, "window.__sameDocument = 1")
        assert wait_for(lambda: last_step() >= first + 10, 30), (first, last_step())
        assert js(browser, "return window.__sameDocument") == 1  # updated in place, not reloaded
    finally:
        p.wait(60)
    assert p.returncode == 0
    assert wait_for(
        lambda: js(browser, "return document.querySelector('[data-status]').dataset.status") == "finished", 20
    )
    st.close()


def test_store_text_is_shown_as_text(tmp_path: Path, browser: Browser, serve: Any) -> None:
    st = SQLiteStore(tmp_path / "x.db")
    evil = "<img src=x onerror=window.__xss=1>"
    t0 = time.time() - 100
    st.append(
        "goodput_x",
        evil,
        EventBatch(
            1,
            0,
            [
                Event(Kind.JOB_START, t0),
                Event(Kind.STEP_START, t0 + 1, step=0),
                Event(Kind.STEP_START, t0 + 2, step=1),
                Event(Kind.CUSTOM_START, t0 + 2.1, name="<b>bold</b>"),
                Event(Kind.CUSTOM_END, t0 + 2.2, name="<b>bold</b>"),
                Event(Kind.STEP_START, t0 + 3, step=2),
                Event(Kind.JOB_END, t0 + 4),
            ],
        ),
    )
    st.append(
        "mlgoodput.console",
        evil,
        EventBatch(
            2, 0, [Event(Kind.LOG, t0 + 1, value=20, name="app", attrs={"msg": "<script>window.__xss=2</script>"})]
        ),
    )
    srv = serve(st)
    base = srv.url.rstrip("/")
    open_page(browser, base + "/", "document.querySelector('#jobs .job-link')")
    assert js(browser, "return document.querySelector('#jobs .job-link').textContent") == evil
    open_page(browser, f"{base}/jobs/{quote(evil, safe='')}", "document.body.dataset.jobReady")
    assert js(browser, "return document.querySelector('main h1').textContent") == evil
    assert js(browser, "return document.querySelector('#breakdown').textContent").count("custom: <B>BOLD</B>") == 1
    open_page(browser, f"{base}/console/{quote(evil, safe='')}", "document.querySelector('#logs .line')")
    assert js(browser, "return document.querySelector('#logs .msg').textContent") == "<script>window.__xss=2</script>"
    assert js(
        browser,
        "return window.__xss === undefined && document.querySelectorAll('main img, main script, main b').length === 0",
    )
    st.close()


def test_token_gates_the_pages(store: SQLiteStore, browser: Browser, serve: Any) -> None:
    fill(store, scenario("s1_clean_run"))
    srv = serve(store, token="tok-123")
    base = srv.url.split("?")[0]
    assert get(base)[0] == 403
    open_page(browser, srv.url, "document.querySelector('#jobs .goodput')")  # the printed URL
    # the cookie set by the first visit carries later requests (the page's API calls did)
    open_page(browser, base + "compare", "document.querySelector('.check-list input')")
    browser.driver.delete_all_cookies()
