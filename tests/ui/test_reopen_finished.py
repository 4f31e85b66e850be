"""A finished job's page on a server started again over the same store: the server starts from
the accounting's saved state (saved by the first server after it answered) and its JSON shows
exactly what the first server showed, with nothing logged; never an empty job."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from ui_helpers import get

from mlgoodput.accounting import GoodputCalculator
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore

T0 = 1_700_000_000.0
AT = T0 + 900.0


def finished_job(hosts: list[int]) -> list[Event]:
    """Hosts stored in the order given (the first one's events first), each stepping, with a
    checkpoint save, then a job end on each."""
    ev = [Event(Kind.JOB_START, T0 + 0.1 * i, host=h) for i, h in enumerate(hosts)]
    for k in range(100):
        for i, h in enumerate(hosts):
            ev.append(Event(Kind.STEP_START, T0 + 10.0 + 2.0 * k + 0.01 * i, host=h, step=k))
        if k == 50:
            for h in hosts:
                ev.append(Event(Kind.CKPT_SAVE_START, T0 + 110.5, host=h, step=k))
                ev.append(Event(Kind.CKPT_SAVE_END, T0 + 111.0, host=h, step=k))
    ev += [Event(Kind.JOB_END, T0 + 220.0 + 0.1 * i, host=h) for i, h in enumerate(hosts)]
    return ev


def _detail(srv: Any, job: str) -> dict[str, Any]:
    status, d, _ = get(f"{srv.url}api/jobs/{quote(job)}")
    assert status == 200, d
    return d  # type: ignore[no-any-return]


@pytest.mark.parametrize("hosts", [[0], [2, 0, 1]], ids=str)
def test_a_finished_job_reopened_shows_what_it_showed(
    hosts: list[int], tmp_path: Path, serve: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "always")
    st = SQLiteStore(tmp_path / "s.db")
    ev = finished_job(hosts)
    st.append("goodput_j", "j", EventBatch(1, 0, ev))
    first = serve(st, clock=lambda: AT)
    d1 = _detail(first, "j")
    assert d1["report"]["status"] == "finished" and d1["report"]["last_step"] == 99
    deadline = time.monotonic() + 30  # the first server saves after it answered (its worker)
    while st.load_state("goodput_j", "j") is None and time.monotonic() < deadline:
        first.api._warm.flush(1.0)  # waits on the worker, not on a clock
    assert st.load_state("goodput_j", "j") is not None
    caplog.set_level(logging.INFO, logger="mlgoodput")
    again = serve(st, clock=lambda: AT)  # as a new process: a new server, a new calculator
    d2 = _detail(again, "j")
    assert d2["report"] == d1["report"]
    assert d2["attempts"] == d1["attempts"] and len(d2["attempts"]) == 1
    assert d2["hosts"] == d1["hosts"] and d2["hosts"]  # not an empty job
    assert d2 == d1
    # the saved state was the one the new server started from (answered without a read)
    calc = GoodputCalculator("j", "goodput_j", store=st, clock=lambda: AT)
    assert calc.report().to_dict() == d1["report"]
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    st.close()
