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
from mlgoodput.ui._job import JobView
from mlgoodput.ui._pieces import PieceWorker, Plan
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
        assert g["errors"]["goodput"]["current"] is True
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


def test_a_failure_is_past_once_the_same_work_succeeds(store: SQLiteStore, serve: Any) -> None:
    """A goodput computation that failed and then succeeds is no longer a current failure:
    the count stays in the JSON, the page (which shows current ones) says nothing."""
    tl = scenario("s1_clean_run")
    fill(store, tl)
    broken = threading.Event()
    broken.set()

    def clock() -> float:
        if broken.is_set() and threading.current_thread().name == "mlgoodput-ui-pieces":
            raise RuntimeError("the clock broke for a while")
        return tl.query

    srv = serve(store, clock=clock)
    base = f"{srv.url.rstrip('/')}/api/jobs/{quote(tl.job_name)}"

    def goodput() -> dict[str, Any]:
        status, g, _ = get(f"{base}/goodput?points=40")
        assert status == 200
        return dict(g)

    wait_for(lambda: goodput()["errors"].get("goodput", {}).get("current"), what="a current goodput failure")
    broken.clear()
    g = wait_for(lambda: (lambda g: g if g["complete"] else None)(goodput()), what="goodput computed after all")
    err = g["errors"]["goodput"]
    assert err["count"] >= 1 and err["current"] is False
    assert "the clock broke" in err["last"]  # what it was, for whoever looks at the JSON


def _view(store: SQLiteStore, worker: PieceWorker) -> tuple[JobView, Plan]:
    tl = scenario("s1_clean_run")
    logger = fill(store, tl)
    v = JobView(store, tl.job_name, logger, clock=lambda: tl.query, piece_worker=worker)
    r = v.report()
    return v, (r.start, r.end, (r.end - r.start) / 4, 4, r.ideal_step_time_s)


def test_a_failed_plan_goes_on_to_the_newer_plan_asked_for_meanwhile(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The computation of one plan fails while a page asks for another: the worker computes
    the newer one at once (its page does not wait out its whole wait for nothing)."""
    worker = PieceWorker()
    try:
        v, plan = _view(store, worker)
        newer: Plan = (plan[0], plan[1], plan[2] / 2, 8, plan[4])
        inside, let_go = threading.Event(), threading.Event()
        settled_until = v.settled_until
        calls = 0

        def first_fails() -> float:
            nonlocal calls
            calls += 1
            if calls == 1:  # the first plan: wait for the newer one to be asked for, then fail
                inside.set()
                let_go.wait(30)
                raise RuntimeError("the first plan failed")
            return settled_until()

        monkeypatch.setattr(v, "settled_until", first_fails)
        threading.Thread(target=v.pieces_for, args=(plan, 30.0), daemon=True).start()
        assert inside.wait(30)
        got: list[bool] = []
        asker = threading.Thread(target=lambda: got.append(v.pieces_for(newer, 20.0)))
        asker.start()
        wait_for(lambda: v.goodput_pieces.plan == newer, what="the newer plan asked for")
        let_go.set()
        asker.join()
        assert got == [True]  # computed, not given up after 20 s
        assert v.errors()["goodput"]["count"] == 1 and v.errors()["goodput"]["current"] is False
    finally:
        worker.close(5)


def test_pieces_save_only_when_a_save_is_due(store: SQLiteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """Computed pieces call the view's (possibly large) save only when one is due."""
    worker = PieceWorker()
    try:
        v, plan = _view(store, worker)
        kept: list[int] = []
        asked: list[int] = []
        due = [False]
        monkeypatch.setattr(v, "keep", lambda: kept.append(1) or True)
        monkeypatch.setattr(v, "keep_due", lambda: asked.append(1) or due[0])
        assert v.pieces_for(plan, 30.0)
        wait_for(lambda: asked, what="the worker to ask whether a save is due")
        assert kept == []
        due[0] = True
        v.pieces.clear()  # computed again
        assert v.pieces_for(plan, 30.0)
        wait_for(lambda: kept == [1], what="the due save")
    finally:
        worker.close(5)
