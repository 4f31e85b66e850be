"""The calculator takes consecutive one-host step pages together (`_StepRun`, the shape a
shipper per host stores every second): exactly what ingesting them page by page gives,
whatever the order of the pages (late pages, overlaps, restarts, other events between)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlgoodput.accounting import GoodputCalculator
from mlgoodput.accounting import _reader as reader_mod
from mlgoodput.accounting._timeline import Timeline
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import Columns, SQLiteStore, open_store
from mlgoodput.store._columns import decode


def _pages(rng: random.Random, hosts: int, rounds: int) -> list[list[Event]]:
    out: list[list[Event]] = [
        [Event(Kind.JOB_START, 10.0, h), Event(Kind.ACCEL_INIT_START, 11.0, h)] for h in range(hosts)
    ]
    t, step = 20.0, 0
    for _ in range(rounds):
        if rng.random() < 0.1:  # a restart of one host, or a checkpoint: not a step page
            h = rng.randrange(hosts)
            out.append([Event(Kind.JOB_START, t, h)] if rng.random() < 0.5 else [Event(Kind.CKPT_SAVE_START, t, h)])
            t += 1.0
        per = rng.randrange(1, 12)
        for h in range(hosts):
            evs = [Event(Kind.STEP_START, t + j * 0.5 + h * 1e-3, h, step=step + j) for j in range(per)]
            if rng.random() < 0.1:
                rng.shuffle(evs)  # out of order inside a page
            out.append(evs)
        if rng.random() < 0.1 and len(out) > 3:  # a page stored late
            i = rng.randrange(len(out) - 3, len(out))
            out.append(out.pop(i))
        if rng.random() < 0.05:  # a page stored twice
            out.append(list(out[-1]))
        step += per
        t += per * 0.5
    return out


def _count_parts(monkeypatch: pytest.MonkeyPatch, into: dict[int, list[int]]) -> None:
    """Count the events of every part a timeline ingests, per timeline (its public `ingest`
    and `ingest_steps`): what the reader gathered from the store's pages."""
    ingest, ingest_steps = Timeline.ingest, Timeline.ingest_steps

    def counted(tl: Timeline, cols: Columns) -> None:
        into.setdefault(id(tl), []).append(len(cols))
        ingest(tl, cols)

    def counted_steps(tl: Timeline, cols: Columns, by_one: bool | None = None) -> None:
        into.setdefault(id(tl), []).append(len(cols))
        ingest_steps(tl, cols, by_one)

    monkeypatch.setattr(Timeline, "ingest", counted)
    monkeypatch.setattr(Timeline, "ingest_steps", counted_steps)


class _ColumnsOnly(SQLiteStore):
    """A paged store that hands over decoded pages only (as PostgreSQL does): no `scan_pages`."""

    scan_pages = None  # type: ignore[assignment]

    def scan(self, namespace: str, job: str, cursor: int = 0) -> Iterator[tuple[int, Columns]]:
        for rows in SQLiteStore.scan_pages(self, namespace, job, cursor):
            for r in rows:
                yield r[0], decode(*r[1:])


@pytest.mark.parametrize("raw", [True, False], ids=["stored-chunks", "columns"])
@pytest.mark.parametrize("seed", range(8))
def test_step_runs_give_what_page_by_page_gives(
    tmp_path: Path, seed: int, raw: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    pages = _pages(rng, rng.randrange(1, 6), rng.randrange(5, 60))
    store: str | SQLiteStore = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    if not raw:
        store = _ColumnsOnly(tmp_path / "s.db")
    runs = reader_mod._RUN_EVENTS
    grouped = GoodputCalculator("j", "goodput", store=store, snapshot=False, clock=lambda: 1e4)
    plain = GoodputCalculator("j", "goodput", store=store, snapshot=False, clock=lambda: 1e4)
    parts: dict[int, list[int]] = {}  # events of each part ingested, per timeline
    _count_parts(monkeypatch, parts)
    seq = i = 0
    while i < len(pages):
        k = rng.randrange(1, 30)
        for evs in pages[i : i + k]:
            st.append("goodput", "j", EventBatch(1 + evs[0].host, seq, evs))
            seq += len(evs)
        i += k
        a = grouped.report()
        monkeypatch.setattr(reader_mod, "_RUN_EVENTS", 0)  # every page ingested on its own
        b = plain.report()
        monkeypatch.setattr(reader_mod, "_RUN_EVENTS", runs)
        assert a == b
        assert grouped._cursor == plain._cursor
        for h, log in plain.timeline.hosts.items():
            mine = grouped.timeline.hosts[h]
            assert (list(mine.times), list(mine.nums), mine.others, mine.job_starts, mine.monotonic) == (
                list(log.times),
                list(log.nums),
                log.others,
                log.job_starts,
                log.monotonic,
            )
        assert (grouped.timeline.events, grouped.timeline.max_time) == (plain.timeline.events, plain.timeline.max_time)
    seen = {"grouped": parts[id(grouped.timeline)], "plain": parts[id(plain.timeline)]}
    assert len(seen["grouped"]) < len(seen["plain"])  # pages were taken together
    for name, got in seen.items():  # every event was ingested once
        assert sum(got) == plain.timeline.events, name
    st.close()
