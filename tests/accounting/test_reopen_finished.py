"""A finished job opened again (a new process: `mlgoodput report`, the UI's job view) starts
from its saved accounting state and shows exactly what the first reader showed: the state is
used, not dropped, and nothing is logged. Where a saved state is dropped after all (a piece
fails its check), the job is read again from the store at once, never shown empty."""

from __future__ import annotations

import io
import json
import logging
import sqlite3
import zlib
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from mlgoodput import cli
from mlgoodput.accounting import GoodputCalculator, _snapshot
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore, StoredRow

T0 = 1_700_000_000.0
JOB, LOGGER = "j", "goodput_j"
AT = T0 + 900.0  # a query time well after the job ended


class CountingSQLite(SQLiteStore):
    """Counts the events read from the job's stream (what a reader did not take from its saved state)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.read_events = 0

    def scan_pages(self, namespace: str, job: str, cursor: int = 0) -> Iterator[list[StoredRow]]:
        for rows in super().scan_pages(namespace, job, cursor):
            self.read_events += sum(len(r[1]) for r in rows)
            yield rows


def finished_job(hosts: list[int]) -> list[Event]:
    """A job that ends: `hosts` stored in that order (the first one's events first), each
    with steps, a checkpoint save and a custom badput span, and a job end on each host."""
    ev: list[Event] = []
    for i, h in enumerate(hosts):
        ev.append(Event(Kind.JOB_START, T0 + 0.1 * i, host=h))
    for k in range(120):
        for i, h in enumerate(hosts):
            ev.append(Event(Kind.STEP_START, T0 + 10.0 + k * 2.0 + 0.01 * i, host=h, step=k))
        if k == 60:
            for h in hosts:
                ev.append(Event(Kind.CKPT_SAVE_START, T0 + 10.5 + k * 2.0, host=h, step=k))
                ev.append(Event(Kind.CKPT_SAVE_END, T0 + 11.0 + k * 2.0, host=h, step=k))
        if k == 90:
            ev.append(Event(Kind.CUSTOM_START, T0 + 10.2 + k * 2.0, host=hosts[0], name="eval"))
            ev.append(Event(Kind.CUSTOM_END, T0 + 10.8 + k * 2.0, host=hosts[0], name="eval"))
    for i, h in enumerate(hosts):
        ev.append(Event(Kind.JOB_END, T0 + 260.0 + 0.1 * i, host=h))
    return ev


# hosts as they first appear in the store: one host; several, in number order; several, the
# first one stored not the lowest (shippers of a real job store in any order)
ORDERS = [[0], [0, 1, 2], [2, 0, 1]]


@pytest.fixture(autouse=True)
def _save_always(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "always")


def _calc(st: object, snapshot: bool = True) -> GoodputCalculator:
    return GoodputCalculator(JOB, LOGGER, store=st, clock=lambda: AT, snapshot=snapshot)


def _saved_state(st: CountingSQLite, hosts: list[int]) -> tuple[list[Event], Any]:
    """The job stored and reported once (which saves its state, with the whole-job answer)."""
    ev = finished_job(hosts)
    st.append(LOGGER, JOB, EventBatch(1, 0, ev))
    first = _calc(st).report()
    assert first.status == "finished" and first.last_step == 119 and first.productive_s > 0
    return ev, first


def _problems(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.mark.parametrize("hosts", ORDERS, ids=str)
def test_a_reopened_finished_job_uses_its_saved_state(
    hosts: list[int], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    st = CountingSQLite(tmp_path / "s.db")
    ev, first = _saved_state(st, hosts)
    st.read_events = 0
    caplog.set_level(logging.INFO, logger="mlgoodput")
    again = _calc(st)
    assert again.report() == first  # the saved answer
    tl = again.timeline  # what the UI's job view follows: the engine, built from the saved state
    assert sorted(tl.hosts) == sorted(hosts) and tl.events == len(ev)
    fresh = _calc(st, snapshot=False)
    window = (T0 + 50.0, T0 + 200.0)
    assert again.report(*window) == fresh.report(*window)
    assert again.stragglers() == fresh.stragglers()
    assert again.partition(read=False) == fresh.partition(read=False)
    assert again.report() == first == fresh.report()
    st.read_events = 0
    assert _calc(st).report(*window) == fresh.report(*window)
    assert st.read_events == 0  # every answer came from the saved state: nothing read again
    assert _problems(caplog) == []


@pytest.mark.parametrize("hosts", ORDERS, ids=str)
def test_the_restored_timeline_keeps_the_hosts_in_stored_order(hosts: list[int], tmp_path: Path) -> None:
    """Hosts in the order they first appear in the store, whether read or restored (a page lists
    them alike either way)."""
    st = CountingSQLite(tmp_path / "s.db")
    _saved_state(st, hosts)
    st.read_events = 0
    restored, read = _calc(st), _calc(st, snapshot=False)
    restored.report(), read.report()  # (a timeline holds what the last query read)
    assert list(restored.timeline.hosts) == list(read.timeline.hosts) == hosts
    assert st.read_events == len(finished_job(hosts))  # the second one's read only


def _cli_report(url: str) -> dict[str, Any]:
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert cli.main(["report", "--job", JOB, "--store", url, "--json", "--at", repr(AT)]) == 0
    out: dict[str, Any] = json.loads(buf.getvalue())
    return out


@pytest.mark.parametrize("hosts", ORDERS, ids=str)
def test_mlgoodput_report_on_a_reopened_finished_job(
    hosts: list[int], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    st = CountingSQLite(tmp_path / "s.db")
    _, first = _saved_state(st, hosts)
    caplog.set_level(logging.INFO, logger="mlgoodput")
    got = _cli_report(st.url)
    assert got["goodput_pct"] == pytest.approx(first.goodput_pct)
    assert got["last_step"] == first.last_step and got["status"] == "finished"
    assert got == _cli_report(st.url)  # a second process: the same, from the same saved state
    assert _problems(caplog) == []


@pytest.mark.parametrize("hosts", [[0], [2, 0, 1]], ids=str)
def test_a_dropped_state_is_read_again_from_the_store_at_once(
    hosts: list[int], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A piece of the saved state found damaged when the engine is built (the header passed,
    so the answer came from it) drops the state with a warning that says so, and the job is
    read again from the store there and then: the timeline a page follows is never empty."""
    path = tmp_path / "s.db"
    st = CountingSQLite(path)
    ev, first = _saved_state(st, hosts)
    with sqlite3.connect(path) as conn:  # the first payload piece: its checksum fails
        cur = conn.execute("UPDATE state_pieces SET data = CAST(zeroblob(length(data)) AS BLOB) WHERE i = 1")
        assert cur.rowcount == 1
    caplog.set_level(logging.WARNING, logger="mlgoodput")
    again = _calc(st)
    assert again.report() == first  # from the header alone: no piece read yet
    assert _problems(caplog) == []
    st.read_events = 0
    tl = again.timeline  # the engine is built now: the damaged piece is found
    assert sorted(tl.hosts) == sorted(hosts) and tl.events == len(ev)
    assert st.read_events == len(ev)  # read again from the store, once
    warned = _problems(caplog)
    assert len(warned) == 1 and "reading the job from the store" in warned[0]
    fresh = _calc(st, snapshot=False)
    assert fresh.report() == first
    assert again.partition(read=False) == fresh.partition(read=False)
    assert again.report() == first and again.report(T0, T0 + 100.0) == fresh.report(T0, T0 + 100.0)


def _as_saved_before(path: Path) -> None:
    """Rewrite the saved header as states were written before the header kept the timeline's
    host order: its hosts sorted by number (the payload and its checksums are unchanged)."""
    with sqlite3.connect(path) as conn:
        (raw,) = conn.execute("SELECT data FROM state_pieces WHERE i = 0").fetchone()
        head = _snapshot.header(bytes(raw))
        head["hosts"] = sorted(head["hosts"], key=lambda m: m["host"])
        body = json.dumps(head, separators=(",", ":"))
        data = body[:-1].encode() + b',"check":' + str(zlib.adler32(body.encode())).encode() + b"}"
        assert conn.execute("UPDATE state_pieces SET data = ? WHERE i = 0", (data,)).rowcount == 1


@pytest.mark.parametrize("hosts", ORDERS, ids=str)
def test_a_state_saved_before_loads_and_is_used(
    hosts: list[int], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A state saved by an earlier version (hosts sorted in its header, the scan of the
    non-step events listing them in the timeline's order) is used as it is: same answers,
    hosts in stored order, nothing read again, nothing logged."""
    path = tmp_path / "s.db"
    st = CountingSQLite(path)
    _, first = _saved_state(st, hosts)
    _as_saved_before(path)
    st.read_events = 0
    caplog.set_level(logging.INFO, logger="mlgoodput")
    again = _calc(st)
    window = (T0 + 50.0, T0 + 200.0)
    assert again.report() == first and list(again.timeline.hosts) == hosts
    assert again.report(*window) == _calc(st, snapshot=False).report(*window)
    assert st.read_events == len(finished_job(hosts))  # the fresh calculator's read only
    assert _problems(caplog) == []
