"""The store writer's column path for log records: the same stored chunks as the event path.

`_records.log_columns` builds a batch's columns without an Event per record and encodes its
text columns with msgspec; the store must get exactly what `log_events` would have given it
(the packed columns byte for byte, the JSON equal as data), whatever the records hold.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

import pytest

from mlgoodput.console import _protocol as P
from mlgoodput.console import _records
from mlgoodput.console._sink import StoreSink
from mlgoodput.store import open_store
from mlgoodput.store._columns import ColumnEvents, encode_batch


def _logs(n: int, **extra: Any) -> list[P.LogRec]:
    return [
        P.LogRec(
            1_700_000_000.0 + i * 0.001, 10 + i % 40, f"log.{i % 3}", f'line {i} é ✓ "q" \\', "/a/b.py", i, **extra
        )
        for i in range(n)
    ]


def _same_chunk(records: list[Any]) -> None:
    cols = _records.log_columns(records, 7)
    assert cols is not None
    plain = encode_batch(_records.log_events(records, 7, "host", 42), 1 << 20)
    fast = encode_batch(cols, 1 << 20)
    assert len(plain) == len(fast) == 1
    a, b = plain[0], fast[0]
    assert (a.n, a.kinds, a.times, a.hosts, a.steps, a.values) == (b.n, b.kinds, b.times, b.hosts, b.steps, b.values)
    assert (a.t_min, a.t_max) == (b.t_min, b.t_max)
    assert a.names is not None and b.names is not None and a.attrs is not None and b.attrs is not None
    assert json.loads(a.names) == json.loads(b.names)
    assert json.loads(a.attrs) == json.loads(b.attrs)
    assert list(cols) == _records.log_events(records, 7, "host", 42)  # the same events when read as events


def test_plain_log_records_make_the_same_chunk() -> None:
    _same_chunk(_logs(1000))


@pytest.mark.parametrize("extra", [{"ansi": "\x1b[1mx\x1b[0m"}, {"exc": "Traceback ...\nValueError"}, {"ansi": ""}])
def test_records_with_ansi_or_exception_text_make_the_same_chunk(extra: dict[str, str]) -> None:
    recs = _logs(20)
    recs[5:9] = _logs(4, **extra)
    _same_chunk(recs)


def test_a_batch_with_other_records_takes_the_event_path() -> None:
    usage = P.UsageRec(1_700_000_000.0, 12.5, 1 << 20, None, None)
    assert _records.log_columns([*_logs(3), usage], 1) is None
    assert _records.log_columns([], 1) is None


def test_joined_runs_keep_their_json_and_a_slice_encodes_its_own() -> None:
    a, b = _records.log_columns(_logs(5), 1), _records.log_columns(_logs(3), 1)
    assert a is not None and b is not None
    j = ColumnEvents.join([a, b])
    assert len(j) == 8 and j.attrs_json is not None and j.names_json is not None
    assert json.loads(j.attrs_json) == j.columns.attrs and json.loads(j.names_json) == j.columns.names
    part = j[2:6]
    assert part.attrs_json is None  # a slice holds no JSON of its own: the store encodes it
    (ch,) = encode_batch(part, 1 << 20)
    assert ch.attrs is not None and json.loads(ch.attrs) == j.columns.attrs[2:6]  # type: ignore[index]


def test_the_sink_merges_column_runs_and_stores_every_record_once() -> None:
    with tempfile.TemporaryDirectory() as d:
        store = open_store(f"{d}/s.db")
        sink = StoreSink(store, "job")
        recs = _logs(300)
        runs = [recs[0:100], recs[100:250], recs[250:300]]
        at = 0
        for r in runs:  # consecutive runs of one writer, then an event-list run of another
            cols = _records.log_columns(r, 1)
            assert cols is not None
            sink.submit_run(5, at, cols)
            at += len(r)
        sink.submit_run(6, 0, _records.log_events(recs[:10], 2, "h", 1))
        sink.start()
        assert sink.flush(30)
        sink.close(5)
        got = list(store.read("mlgoodput.console", "job").columns.events())
        store.close()
    assert len(got) == 310
    mine = [e for e in got if e.host == 1]
    assert mine == _records.log_events(recs, 1, "h", 1)


def test_the_sink_stores_a_run_as_soon_as_it_comes_and_a_writer_can_wait_for_it() -> None:
    """A submitted run wakes the store writer (no waiting out its interval or a back-off after
    a busy round), and `wait_below` returns once the store caught up."""
    with tempfile.TemporaryDirectory() as d:
        store = open_store(f"{d}/s.db")
        sink = StoreSink(store, "job", interval_s=60.0)
        sink.start()
        try:
            at = 0
            for k in range(5):
                cols = _records.log_columns(_logs(200), 1)
                assert cols is not None
                sink.submit_run(5, at, cols)
                at += 200
                assert sink.wait_below(0, 10.0), f"run {k} not stored within 10 s"
            assert sink.stored_events == 1000 and sink.pending_events == 0
        finally:
            sink.close(5)
            store.close()
