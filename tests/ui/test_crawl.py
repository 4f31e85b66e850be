"""Every link of the web UI leads somewhere: a store filled by every demo (the JAX, simulated
and torch demos, and the UI sample workload), served on loopback, crawled breadth-first in
headless Chromium from the jobs page. Each same-origin link must answer (not 404), each
page must render without the error card and without a console error. A job, its ML run and
its console job link to each other; an empty store's Runs and Console pages say how to
fill them."""

from __future__ import annotations

import contextlib
import importlib.util
import subprocess
import sys
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urldefrag, urlsplit

import pytest

from mlgoodput._recovery import recover_journals
from mlgoodput.store import SQLiteStore
from mlgoodput.ui._browser import Browser
from waiting import wait_for

pytestmark = pytest.mark.slow

#: counts the page's fetches until their JSON is read (a page draws right after), so that
#: "rendered" means: loaded, its main element filled and nothing left to fetch
_COUNT_FETCHES = """(() => {
  window.__mlgFetches = 0;
  const realFetch = window.fetch;
  window.fetch = function (...args) {
    window.__mlgFetches++;
    const done = () => setTimeout(() => { window.__mlgFetches--; }, 0);
    return realFetch.apply(this, args).then((r) => {
      const json = r.json.bind(r);
      r.json = () => json().finally(done);
      return r;
    }, (e) => { done(); throw e; });
  };
})();"""
_RENDERED = """return document.readyState === 'complete' && window.__mlgFetches === 0
  && document.getElementById('main').childElementCount > 0
  && (!location.pathname.startsWith('/jobs/') || !!document.body.dataset.jobReady
      || !!document.querySelector('#main .card.err'))"""
_LINKS = "return Array.from(document.querySelectorAll('a[href]')).map((a) => [a.href, a.hasAttribute('download')])"


def _demo(out: Path, *argv: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, "-m", "mlgoodput", "demo", "--output-dir", str(out), *argv]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One store filled by every demo, run at once in their fast form (a few steps, a short clock)."""
    out = tmp_path_factory.mktemp("crawl") / "demo-output"
    fast = ("--steps", "6", "--kill-at-step", "3", "--time-scale", "0.02")
    procs = {"demo-sim": _demo(out, "--workload", "mlgoodput._demo.workload_sim", *fast)}
    if all(importlib.util.find_spec(m) for m in ("jax", "optax", "orbax")):
        procs["demo"] = _demo(out, "--framework", "jax", *fast)
    if importlib.util.find_spec("torch"):
        procs["demo-torch"] = _demo(out, "--framework", "torch", "--steps", "4", "--kill-at-step", "2")
    db = out / "demo.db"
    for job, p in procs.items():
        text, _ = p.communicate(timeout=240)
        assert p.returncode == 0, f"{job}: {text[-3000:]}"
        assert f"--job {job}" in text[text.index("Next, try these") :], text[-2000:]
    sample = subprocess.run(
        [sys.executable, "-m", "mlgoodput._demo.workload_ui", "--store", str(db), "--steps", "20", "--step-s", "0.02"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert sample.returncode == 0, sample.stderr[-3000:]
    recover_journals(str(db))  # as `mlgoodput ui` does when it opens the store
    yield db


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            r.read()
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def _fresh_page(b: Browser, url: str) -> None:
    b.driver.get(url)
    wait_for(lambda: b.driver.execute_script(_RENDERED), 30, what=f"{url} to render")


def crawl(b: Browser, base: str, limit: int = 400) -> tuple[dict[str, list[str]], list[str]]:
    """({page: links on it}, problems): every same-origin page reached from `base` + "/"."""
    with counting_fetches(b):
        return _crawl(b, base, limit)


@contextlib.contextmanager
def counting_fetches(b: Browser) -> Iterator[None]:
    """Pages opened inside count their fetches (for `_fresh_page`); the session's browser
    is left as it was."""
    script = b.driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _COUNT_FETCHES})
    try:
        yield
    finally:
        b.driver.execute_cdp_cmd("Page.removeScriptToEvaluateOnNewDocument", script)


def _crawl(b: Browser, base: str, limit: int) -> tuple[dict[str, list[str]], list[str]]:
    origin = urlsplit(base).netloc
    seen = {base + "/"}
    todo = deque([base + "/"])
    pages: dict[str, list[str]] = {}
    problems: list[str] = []
    b.console_errors()
    while todo and len(pages) < limit:
        url = todo.popleft()
        status = _status(url)
        if status != 200:
            problems.append(f"{url}: HTTP {status}")
            continue
        if urlsplit(url).path.startswith("/api/"):
            pages[url] = []
            continue
        _fresh_page(b, url)
        err = b.driver.execute_script("const e = document.querySelector('#main .card.err'); return e && e.textContent")
        if err:
            problems.append(f"{url}: error card {err!r}")
        for e in b.console_errors():
            problems.append(f"{url}: console error {e}")
        links = []
        for href, download in b.driver.execute_script(_LINKS):
            link = urldefrag(href)[0]
            if urlsplit(link).netloc != origin:
                continue
            links.append(link)
            if link not in seen:
                seen.add(link)
                if download:
                    status = _status(link)  # a file: fetched, not opened
                    if status != 200:
                        problems.append(f"{link} (download on {url}): HTTP {status}")
                else:
                    todo.append(link)
        pages[url] = links
    assert not todo, f"more than {limit} pages: {list(todo)[:5]}"
    return pages, problems


def test_every_link_of_every_page_answers(demo_store: Path, browser: Browser, serve: Any) -> None:
    st = SQLiteStore(demo_store)
    srv = serve(st)
    base = srv.url.rstrip("/")
    pages, problems = crawl(browser, base)
    assert problems == [], "\n".join(problems)
    # every demo's job, run and console are reached, and link to each other
    runs = {j.job for j in st.jobs() if j.namespace == "mlgoodput.run"}
    jobs = [j.job for j in st.jobs() if j.namespace.startswith("goodput")]
    assert {"demo-sim", "ui-sample"} <= set(jobs), jobs
    for job in jobs:
        on_job = pages[f"{base}/jobs/{job}"]
        [run] = [u for u in on_job if u.startswith(f"{base}/runs/{job}-")]
        assert run.rsplit("/", 1)[1] in runs and run in pages, (job, run)
        assert f"{base}/console/{job}" in on_job, (job, on_job)
        on_console = pages[f"{base}/console/{job}"]
        assert f"{base}/jobs/{job}" in on_console and run in on_console, (job, on_console)
    st.close()


def test_empty_store_pages_say_how_to_fill_them(tmp_path: Path, browser: Browser, serve: Any) -> None:
    st = SQLiteStore(tmp_path / "empty.db")
    srv = serve(st)
    base = srv.url.rstrip("/")
    pages, problems = crawl(browser, base)
    assert problems == [], "\n".join(problems)
    assert f"{base}/runs" in pages and f"{base}/console" in pages
    for path, words in (("/runs", "machinelearning_run"), ("/console", "console.session")):
        with counting_fetches(browser):
            _fresh_page(browser, base + path)
        text = browser.driver.execute_script("return document.querySelector('#main .empty').textContent")
        assert words in text and "make demo" in text, text
    st.close()


def test_every_demo_timeline_is_its_breakdown(demo_store: Path, serve: Any) -> None:
    """On every demo's job the timeline colours the report's seconds per bucket, and no
    segment is stall-red where the report counts no stall."""
    from test_api import lane_seconds, report_seconds
    from ui_helpers import get

    st = SQLiteStore(demo_store)
    srv = serve(st)
    jobs = [j.job for j in st.jobs() if j.namespace.startswith("goodput")]
    assert {"demo-sim", "ui-sample"} <= set(jobs), jobs
    for job in jobs:
        _, rep, _ = get(f"{srv.url}api/jobs/{job}/report")
        _, tl, _ = get(f"{srv.url}api/jobs/{job}/timeline?width=1200")
        want, got = report_seconds(rep), lane_seconds(tl)
        for k in set(want) | set(got):
            assert got.get(k, 0.0) == pytest.approx(want.get(k, 0.0), abs=1e-6), (job, k)
        assert ("stall" in got) == (want.get("stall", 0.0) > 0), (job, got)
    st.close()
