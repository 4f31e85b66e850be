"""Screenshots of every page for one job: `python -m mlgoodput.ui.screenshots --store URL --out DIR`.

Starts the server on a free loopback port over the store, opens each page in headless
Chromium (Debian's, through its chromedriver) and writes one PNG per page.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from urllib.parse import quote


def _wait(driver: object, script: str, timeout_s: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if driver.execute_script(script):  # type: ignore[attr-defined]
            return True
        time.sleep(0.1)
    return False


def take(
    store_url: str,
    out: Path,
    job: str | None = None,
    run: str | None = None,
    console: str | None = None,
    compare: list[str] | None = None,
) -> list[Path]:
    from mlgoodput.store import open_store
    from mlgoodput.ui._browser import Browser
    from mlgoodput.ui._server import UIServer

    store = open_store(store_url)
    srv = UIServer(store, "127.0.0.1", 0)
    srv.start()
    base = srv.url.rstrip("/")
    out.mkdir(parents=True, exist_ok=True)
    jobs = [j.job for j in store.jobs() if not j.namespace.startswith("mlgoodput.")]
    job = job or (jobs[0] if jobs else None)
    runs = [j.job for j in store.jobs() if j.namespace == "mlgoodput.run"]
    consoles = [j.job for j in store.jobs() if j.namespace == "mlgoodput.console"]
    pages: list[tuple[str, str, str]] = [("jobs", "/", "document.querySelector('#jobs .goodput')")]
    if job:
        pages.append(
            (
                "job",
                f"/jobs/{quote(job, safe='')}",
                "document.body.dataset.goodputComplete && document.querySelector('#goodput-chart canvas')",
            )
        )
    pages.append(("runs", "/runs", "document.querySelector('main h1')"))
    run = run or (runs[0] if runs else None)
    if run:
        pages.append(
            (
                "run",
                f"/runs/{quote(run, safe='')}",
                "document.querySelector('#metric-chart canvas, #metric-chart .empty')",
            )
        )
    console = console or (job if job in consoles else (consoles[0] if consoles else None))
    if console:
        pages.append(
            ("console", f"/console/{quote(console, safe='')}", "document.querySelector('#logs .line, #logs .muted')")
        )
    else:
        pages.append(("console", "/console", "document.querySelector('main h1')"))
    cmp = compare or jobs[:3]
    pages.append(
        (
            "compare",
            "/compare?" + "&".join("job=" + quote(j, safe="") for j in cmp),
            "document.querySelector('#compare') || document.querySelector('.empty')",
        )
    )
    written = []
    b = Browser(1440, 1000)
    try:
        for name, path, ready in pages:
            b.driver.get(base + path)
            _wait(b.driver, f"return !!({ready})")
            time.sleep(0.4)  # let the charts finish their first frame
            h = b.driver.execute_script("return document.documentElement.scrollHeight")
            b.driver.set_window_size(1440, min(4000, max(900, int(h) + 40)))
            time.sleep(0.2)
            p = out / f"{name}.png"
            b.driver.save_screenshot(str(p))
            written.append(p)
            errs = b.console_errors()
            if errs:
                print(f"{name}: browser console: {errs}", file=sys.stderr)
            b.driver.set_window_size(1440, 1000)
    finally:
        b.close()
        srv.stop()
    return written


def _with_sample(store: str, out: Path) -> str:
    import shutil
    import subprocess

    from mlgoodput.store import resolve_store_url, store_file

    path = store_file(resolve_store_url(store))
    out.mkdir(parents=True, exist_ok=True)
    copy = out / "store.db"
    copy.unlink(missing_ok=True)
    if path is not None and Path(path).exists():
        shutil.copyfile(path, copy)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "mlgoodput._demo.workload_ui",
            "--store",
            str(copy),
            "--job",
            "ui-sample",
            "--steps",
            "80",
        ],
        check=True,
        capture_output=True,
    )
    return str(copy)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mlgoodput.ui.screenshots", description=__doc__)
    ap.add_argument("--store", default="demo-output/demo.db", help="store URL or path (default: the demo's)")
    ap.add_argument("--out", type=Path, default=Path("ui-screenshots"), help="where to write the PNGs")
    ap.add_argument("--job", default=None, help="the job to show (default: the first)")
    ap.add_argument("--run", default=None)
    ap.add_argument("--console", default=None)
    ap.add_argument("--compare", action="append", default=None, help="a job to compare (repeat)")
    ap.add_argument(
        "--sample",
        action="store_true",
        help="copy the store into OUT and record a short sample job there first (job"
        " ui-sample: a console session and an ML run), so that every page has content",
    )
    a = ap.parse_args(argv)
    from mlgoodput.ui._browser import browser_missing

    why = browser_missing()
    if why:
        print(f"screenshots: error: {why}", file=sys.stderr)
        return 2
    store = a.store
    if a.sample:
        store = _with_sample(store, a.out)
    for p in take(store, a.out, a.job, a.run, a.console, a.compare):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
