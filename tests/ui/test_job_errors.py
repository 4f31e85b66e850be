"""Background work of a job page that fails is counted, logged once and shown in the API's
JSON (a bug in goodput over time is a note on the page, not an empty chart)."""

from __future__ import annotations

import logging
import threading
from typing import Any
from urllib.parse import quote

import pytest
from ui_helpers import fill, get, scenario

from mlgoodput.store import SQLiteStore
from waiting import wait_for


def test_goodput_over_time_that_fails_is_counted_logged_once_and_shown(
    store: SQLiteStore, serve: Any, caplog: pytest.LogCaptureFixture
) -> None:
    tl = scenario("s1_clean_run")
    fill(store, tl)

    def clock() -> float:  # the server's clock, broken on the worker that computes goodput over time
        if threading.current_thread().name == "mlgoodput-ui-pieces":
            raise RuntimeError("the clock broke while computing goodput over time")
        return tl.query

    srv = serve(store, clock=clock)
    base = f"{srv.url.rstrip('/')}/api/jobs/{quote(tl.job_name)}"

    def failed(n: int) -> dict[str, Any] | None:
        status, g, _ = get(f"{base}/goodput?points=40")
        assert status == 200
        err = g["errors"].get("goodput")
        return g if err is not None and err["count"] >= n else None

    with caplog.at_level(logging.WARNING, logger="mlgoodput.ui"):
        g = wait_for(lambda: failed(1), what="the goodput failure in the API's JSON")
        assert g["x"] == [] and not g["complete"]
        assert "RuntimeError: the clock broke" in g["errors"]["goodput"]["last"]
        wait_for(lambda: failed(3), what="each request to try again, and count again")
    said = [r for r in caplog.records if "goodput failed" in r.getMessage()]
    assert len(said) == 1  # logged once, however often it fails
    status, d, _ = get(base)
    assert status == 200 and d["errors"]["goodput"]["count"] >= 3
    assert d["report"]["total_s"] > 0  # the job's own figures are still there


def test_a_job_whose_background_work_succeeds_shows_no_errors(store: SQLiteStore, serve: Any) -> None:
    tl = scenario("s1_clean_run")
    fill(store, tl)
    srv = serve(store, clock=lambda: tl.query)
    base = f"{srv.url.rstrip('/')}/api/jobs/{quote(tl.job_name)}"

    def complete() -> dict[str, Any] | None:
        _, g, _ = get(f"{base}/goodput?points=40")
        return g if g["complete"] else None

    g = wait_for(complete, what="goodput over time computed")
    assert g["x"] and g["errors"] == {}
    assert get(base)[1]["errors"] == {}


@pytest.mark.slow
def test_the_job_page_shows_a_goodput_failure(store: SQLiteStore, serve: Any, browser: Any) -> None:
    tl = scenario("s1_clean_run")
    fill(store, tl)

    def clock() -> float:
        if threading.current_thread().name == "mlgoodput-ui-pieces":
            raise RuntimeError("the clock broke while computing goodput over time")
        return tl.query

    srv = serve(store, clock=clock)
    browser.console_errors()  # what earlier pages left
    browser.driver.get(f"{srv.url}jobs/{quote(tl.job_name)}")
    shown = "const e = document.getElementById('goodput-error'); return e && !e.hidden ? e.textContent : ''"
    text = wait_for(lambda: browser.driver.execute_script(shown), what="the goodput failure on the page")
    assert "goodput failed" in text and "RuntimeError: the clock broke" in text
    assert browser.console_errors() == []
