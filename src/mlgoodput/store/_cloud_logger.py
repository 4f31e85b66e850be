"""`from_cloud_logger`: any ml-goodput-measurement `cloud_logger` object as a store.

ml-goodput-measurement hands its recorder and calculator a `cloud_logger`: an object with
`write_cloud_logging_entry(entry)` and `read_cloud_logging_entries(start_time=None,
end_time=None, last_entry_info=None)` returning `(payloads, (timestamp, insert_id))`
(older versions and test doubles return just the payload list, and some ignore
`last_entry_info`). This store translates events through the same schema as the
Cloud Logging store (`_logschema`), so both tools share one log.
"""

from __future__ import annotations

import inspect
import itertools
import json
import logging
import threading
import urllib.parse
import weakref
from typing import Any

from mlgoodput.events import EventBatch
from mlgoodput.store import _exactly_once
from mlgoodput.store._columns import Columns
from mlgoodput.store._exactly_once import WriterMarks
from mlgoodput.store._logschema import JOB_NAME, to_event, to_payload
from mlgoodput.store._protocol import JobInfo, ReadResult, Store, StoreError

_tokens: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_tokens_lock = threading.Lock()
_next_token = itertools.count(1)


def logger_token(cloud_logger: Any) -> str:
    """A name for this logger object that no later object gets (an `id()` is reused once the
    object is gone, and a new logger must not be handed a dead one's journal)."""
    try:
        with _tokens_lock:
            token = _tokens.get(cloud_logger)
            if token is None:
                token = _tokens[cloud_logger] = next(_next_token)
        return f"t{token:x}"
    except TypeError:  # not weakly referable (a __slots__ class without __weakref__): its id
        return f"{id(cloud_logger):x}"


class CloudLoggerStore:
    """A store over a seed-style `cloud_logger` for one log (`logger_name`).

    The logger's reads are job-wide, so this store keeps what it has read (as packed
    columns) and hands out cursors into that view; entries that come back twice (a
    logger that ignores `last_entry_info`, a replayed write) are kept once.
    """

    def __init__(self, cloud_logger: Any, logger_name: str) -> None:
        for method in ("write_cloud_logging_entry", "read_cloud_logging_entries"):
            if not callable(getattr(cloud_logger, method, None)):
                raise TypeError(f"cloud_logger must have a {method}() method, got {cloud_logger!r}")
        if not isinstance(logger_name, str) or not logger_name.strip():
            raise ValueError(f"logger_name must be a non-empty string, got {logger_name!r}")
        self.cloud_logger = cloud_logger
        self.logger_name = logger_name
        job = getattr(cloud_logger, "job_name", None)
        self.job_name: str | None = job if isinstance(job, str) and job else None
        # The object's token is part of the URL: journals are shared by URL, and two loggers
        # (two test doubles, say) for the same log and job must each get their own events.
        job_part = urllib.parse.quote(self.job_name or "", safe="")
        token = logger_token(cloud_logger)
        self.url = f"cloudlogger://{urllib.parse.quote(logger_name, safe='')}/{job_part}#{token}"
        try:
            params = inspect.signature(cloud_logger.read_cloud_logging_entries).parameters
            self._incremental = "last_entry_info" in params
        except (TypeError, ValueError):
            self._incremental = False
        self._lock = threading.RLock()
        self._marks = WriterMarks()
        self._last_info: Any = None
        self._seen: set[int] = set()
        self._parts: dict[str, list[Columns]] = {}  # job -> chunks, in the order read
        self._counts: dict[str, list[int]] = {}  # job -> cumulative event counts of the chunks
        self._info: dict[str, list[float]] = {}  # job -> [events, first, last]

    def _check(self, namespace: str, job: str) -> None:
        if namespace != self.logger_name:
            raise StoreError(f"{self.url} holds only log {self.logger_name!r}, not {namespace!r}")
        if self.job_name is not None and job != self.job_name:
            raise StoreError(f"{self.url}: its cloud_logger is for job {self.job_name!r}, not {job!r}")

    def append(self, namespace: str, job: str, batch: EventBatch) -> None:
        self._check(namespace, job)
        with self._lock:
            part = self._marks.new_part(batch)
            if part is None:
                return
            for i, e in enumerate(batch.events[part.skip :], start=part.first):
                try:
                    self.cloud_logger.write_cloud_logging_entry(to_payload(job, e))
                except Exception as err:
                    raise StoreError(f"{self.url}: write_cloud_logging_entry failed: {err}") from err
                _exactly_once.before_mark(part)
                self._marks.advance(batch.writer, i + 1)

    def _fetch(self) -> list[dict[str, Any]]:
        try:
            if self._incremental and self._last_info is not None:
                got = self.cloud_logger.read_cloud_logging_entries(last_entry_info=self._last_info)
            else:
                got = self.cloud_logger.read_cloud_logging_entries()
        except Exception as err:
            raise StoreError(f"{self.url}: read_cloud_logging_entries failed: {err}") from err
        if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], list):
            payloads, info = got
            if isinstance(info, tuple) and len(info) == 2 and info[0] is not None:
                self._last_info = info
        else:
            payloads = list(got or [])
        return [p for p in payloads if isinstance(p, dict)]

    def _refresh(self) -> None:
        fresh: dict[str, list[Any]] = {}
        for p in self._fetch():
            job = p.get(JOB_NAME)
            if not isinstance(job, str):
                continue
            key = hash(json.dumps(p, sort_keys=True, default=str))
            if key in self._seen:
                continue
            ev = to_event(p)
            if ev is None:
                continue
            self._seen.add(key)
            fresh.setdefault(job, []).append(ev)
        for job, events in fresh.items():
            cols = Columns.from_events(events)
            parts = self._parts.setdefault(job, [])
            counts = self._counts.setdefault(job, [])
            parts.append(cols)
            counts.append((counts[-1] if counts else 0) + len(cols))
            info = self._info.setdefault(job, [0, min(cols.times), max(cols.times)])
            info[0] += len(cols)
            info[1] = min(info[1], min(cols.times))
            info[2] = max(info[2], max(cols.times))

    def read(self, namespace: str, job: str, cursor: int = 0) -> ReadResult:
        """Events of `job` read after `cursor` (a count of events this store has read)."""
        if namespace != self.logger_name:
            return ReadResult([], cursor)
        with self._lock:
            self._refresh()
            parts = self._parts.get(job, [])
            counts = self._counts.get(job, [])
            out: list[Columns] = []
            done = 0
            for cols, end in zip(parts, counts, strict=True):
                if end > cursor:
                    out.append(cols if done >= cursor else cols.slice(cursor - done))
                done = end
            return ReadResult(out, max(cursor, counts[-1] if counts else 0))

    def jobs(self) -> list[JobInfo]:
        with self._lock:
            self._refresh()
            return [JobInfo(self.logger_name, job, int(v[0]), v[1], v[2]) for job, v in sorted(self._info.items())]

    def close(self) -> None:
        flush = getattr(self.cloud_logger, "flush", None)
        if callable(flush):
            try:
                flush()
            except Exception as e:  # said, not raised: close() runs on the way out of training
                logging.getLogger("mlgoodput").warning(
                    "mlgoodput: %s: the cloud_logger's flush() failed at close (%s: %s); entries it still"
                    " held may not be written",
                    self.url,
                    type(e).__name__,
                    e,
                )


def from_cloud_logger(cloud_logger: Any, logger_name: str) -> Store:
    """A store that reads and writes through an ml-goodput-measurement `cloud_logger`.

    `cloud_logger` is any object with the seed's `write_cloud_logging_entry(entry)` and
    `read_cloud_logging_entries(...)` (its `_CloudLogger`, or a test double); `logger_name`
    is the log it serves (the store's only namespace). Entries use the seed's payload
    schema, so ml-goodput-measurement reads what this store writes and the other way round.
    """
    return CloudLoggerStore(cloud_logger, logger_name)
