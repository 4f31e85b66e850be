"""The `append_batches` contract, every store: many streams' batches at once, each kept once
per writer, and all or nothing where the store has the ability (one transaction)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import _exactly_once, append_batches, open_store
from mlgoodput.store._registry import backends
from tests.store.test_store_contract import fresh_url

ALL = [b.name for b in backends()]


@pytest.fixture(params=ALL)
def store_url(request: pytest.FixtureRequest) -> str:
    return fresh_url(request, request.param)


def steps(first: int, n: int, host: int = 0) -> list[Event]:
    return [Event(Kind.STEP_START, 1000.0 + i, host, step=i) for i in range(first, first + n)]


def _stored(url: str, ns: str, job: str) -> list[tuple[int, int | None]]:
    st = open_store(url)
    try:
        return sorted((e.host, e.step) for e in st.read(ns, job).columns.events())
    finally:
        st.close()


def _w() -> int:
    return uuid.uuid4().int >> 65


def test_every_batch_of_every_stream_once(store_url: str) -> None:
    st = open_store(store_url)
    j1, j2 = uuid.uuid4().hex, uuid.uuid4().hex
    a, b, c = _w(), _w(), _w()
    items = [
        ("ns", j1, EventBatch(a, 0, steps(0, 5, 0))),
        ("ns", j1, EventBatch(b, 0, steps(0, 3, 1))),
        ("other", j2, EventBatch(c, 0, steps(0, 4, 2))),
        ("ns", j1, EventBatch(a, 5, steps(5, 2, 0))),  # the same writer again, later in the same call
        ("ns", j1, EventBatch(b, 0, [])),
    ]
    append_batches(st, items)
    append_batches(st, items)  # a replay of the whole round
    append_batches(st, [("ns", j1, EventBatch(a, 3, steps(3, 6, 0)))])  # overlapping, with 2 new
    st.close()
    assert _stored(store_url, "ns", j1) == sorted([(0, i) for i in range(9)] + [(1, i) for i in range(3)])
    assert _stored(store_url, "other", j2) == [(2, i) for i in range(4)]


class _Crash(Exception):
    pass


def test_all_or_nothing_when_a_mark_fails(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure between a batch's rows and its mark: with the ability nothing of the call
    is stored; without it (one append per item) the store keeps what its `append` promises,
    and the replay that follows leaves every event stored once either way."""
    st = open_store(store_url)
    j = uuid.uuid4().hex
    a, b = _w(), _w()
    items = [("ns", j, EventBatch(a, 0, steps(0, 4, 0))), ("ns", j, EventBatch(b, 0, steps(0, 4, 1)))]
    seen: list[Any] = []

    def crash(part: _exactly_once.NewPart) -> None:
        seen.append(part)
        if part.writer == b:
            raise _Crash

    monkeypatch.setattr(_exactly_once, "before_mark", crash)
    with pytest.raises(_Crash):
        append_batches(st, items)
    monkeypatch.undo()
    st.close()
    if hasattr(st, "append_batches"):
        assert _stored(store_url, "ns", j) == []
    again = open_store(store_url)
    append_batches(again, items)
    again.close()
    assert _stored(store_url, "ns", j) == sorted([(0, i) for i in range(4)] + [(1, i) for i in range(4)])


def test_the_helper_falls_back_to_append() -> None:
    """A store without the ability gets one `append` per item, in order."""

    class Plain:
        url = "plain://"

        def __init__(self) -> None:
            self.calls: list[tuple[str, str, int]] = []

        def append(self, namespace: str, job: str, batch: EventBatch) -> None:
            self.calls.append((namespace, job, batch.writer))

    p = Plain()
    append_batches(p, [("a", "j", EventBatch(1, 0, steps(0, 1))), ("b", "k", EventBatch(2, 0, steps(0, 1)))])
    assert p.calls == [("a", "j", 1), ("b", "k", 2)]
