"""A store in Google Cloud Logging: `cloudlogging://PROJECT[/LOG_NAME][?options]`.

A namespace is a log (the logger name, as in ml-goodput-measurement) and a job is the
`jsonPayload.job_name` of its entries; every event is one INFO entry in the seed's payload
schema (`_logschema`), written in batches through the real google-cloud-logging client.
A `/LOG_NAME` in the URL limits `jobs()` to that log; without it `jobs()` scans the project.

Reads follow page tokens, and back off and retry on RESOURCE_EXHAUSTED (the read quota is
small), UNAVAILABLE, DEADLINE_EXCEEDED and INTERNAL. They are incremental: each stream
remembers the newest `receiveTimestamp` it has seen and asks only for entries received
since then, minus a settle window (`settle=` seconds, default 30) that catches entries
which become visible a little after newer ones; entries read twice are kept once (by
insertId). Entry `timestamp`s are set by writers and may be backfilled, so they cannot
serve as a cursor. A cursor is a position in this store object's view of the stream.

Options: `endpoint=HOST:PORT` (another server), `insecure=true` (plaintext gRPC with
anonymous credentials, for emulators and tests), `settle=SECONDS`, `deadline=SECONDS`
(how long a call keeps retrying, default 120).
"""

from __future__ import annotations

import bisect
import datetime as _dt
import logging
import re
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any

from mlgoodput.events import EventBatch
from mlgoodput.store import _exactly_once
from mlgoodput.store._columns import Columns
from mlgoodput.store._exactly_once import WriterMarks
from mlgoodput.store._logschema import JOB_NAME, to_event, to_payload
from mlgoodput.store._protocol import JobInfo, ReadResult, StoreError
from mlgoodput.store._registry import StoreBackend, register

SCHEME = "cloudlogging://"
log = logging.getLogger("mlgoodput.store")
MAX_ENTRIES_PER_WRITE = 1000
MAX_BYTES_PER_WRITE = 8 * 1024 * 1024  # the service takes 10 MB per request; stay clear of it
PAGE_SIZE = 1000
_LOG_ID = re.compile(r"^[A-Za-z0-9_./-]{1,511}$")
_PROJECT = re.compile(r"^[a-z0-9][a-z0-9.:-]{0,62}$")
_INFO = 200  # google.logging.type.LogSeverity.INFO
# as the client's own channels: no cap on message size (a page of big entries exceeds 4 MB)
_CHANNEL_OPTIONS = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
_OUR_ID = re.compile(r"^mlgoodput-(\d+)-(\d+)$")


def _require_logging() -> Any:
    try:
        from google.cloud import logging_v2
    except ImportError as e:
        raise ImportError("a cloudlogging:// store needs google-cloud-logging: pip install 'mlgoodput[gcp]'") from e
    return logging_v2


def parse_url(url: str, arg: str = "store") -> tuple[str, str | None, dict[str, str]]:
    """(project, log name or None, options) of a `cloudlogging://` URL; ValueError if malformed."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "cloudlogging":
        raise ValueError(f"{arg}: not a cloudlogging:// URL: {url!r}")
    project = parts.netloc
    if not _PROJECT.match(project):
        raise ValueError(f"{arg}: expected cloudlogging://PROJECT[/LOG_NAME], got project {project!r} in {url!r}")
    log = urllib.parse.unquote(parts.path.lstrip("/")) or None
    if log is not None and not _LOG_ID.match(log):
        raise ValueError(
            f"{arg}: a log name has only letters, digits and _ . / - (at most 511), got {log!r} in {url!r}"
        )
    opts: dict[str, str] = {}
    for key, value in urllib.parse.parse_qsl(parts.query, keep_blank_values=True):
        if key not in ("endpoint", "insecure", "settle", "deadline"):
            raise ValueError(f"{arg}: unknown option {key!r} in {url!r} (endpoint, insecure, settle, deadline)")
        opts[key] = value
    if opts.get("insecure", "false").lower() not in ("true", "1", "false", "0"):
        raise ValueError(f"{arg}: insecure must be true or false, got {opts['insecure']!r} in {url!r}")
    if opts.get("insecure", "false").lower() in ("true", "1") and not opts.get("endpoint"):
        raise ValueError(f"{arg}: insecure=true needs endpoint=HOST:PORT (the default endpoint is TLS only) in {url!r}")
    for key in ("settle", "deadline"):
        if key in opts:
            try:
                ok = float(opts[key]) >= 0
            except ValueError:
                ok = False
            if not ok:
                raise ValueError(f"{arg}: {key} must be a number of seconds >= 0, got {opts[key]!r} in {url!r}")
    return project, log, opts


def _rfc3339(ns: int) -> str:
    secs, rem = divmod(ns, 1_000_000_000)
    base = _dt.datetime.fromtimestamp(secs, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{base}.{rem:09d}Z"


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _py(v: Any) -> Any:
    """A google.protobuf.Value as a Python value."""
    kind = v.WhichOneof("kind")
    if kind == "number_value":
        return v.number_value
    if kind == "string_value":
        return v.string_value
    if kind == "bool_value":
        return v.bool_value
    if kind == "struct_value":
        return {k: _py(x) for k, x in v.struct_value.fields.items()}
    if kind == "list_value":
        return [_py(x) for x in v.list_value.values]
    return None


class _SeqSet:
    """Sequence numbers seen per writer, as merged intervals (a writer's are mostly contiguous)."""

    def __init__(self) -> None:
        self._spans: dict[int, list[list[int]]] = {}

    def add(self, writer: int, seq: int) -> bool:
        """Record (writer, seq); False if it was already there."""
        spans = self._spans.setdefault(writer, [])
        i = bisect.bisect_right(spans, [seq, float("inf")]) - 1
        if i >= 0 and spans[i][0] <= seq < spans[i][1]:
            return False
        if i >= 0 and spans[i][1] == seq:
            spans[i][1] = seq + 1
        else:
            i += 1
            spans.insert(i, [seq, seq + 1])
        if i + 1 < len(spans) and spans[i + 1][0] == spans[i][1]:
            spans[i][1] = spans[i + 1][1]
            del spans[i + 1]
        return True


class _Scan:
    """One incremental query (a filter) and what it has seen: the receive-time frontier,
    our own (writer, seq) ids, and other insertIds inside the settle window."""

    def __init__(self, base_filter: str) -> None:
        self.base_filter = base_filter
        self.frontier_ns: int | None = None
        self.ours = _SeqSet()
        self.recent: dict[str, int] = {}  # insertId -> receive ns, for ids inside the window

    def filter(self, settle_ns: int) -> str:
        if self.frontier_ns is None:
            return self.base_filter
        return f'{self.base_filter} AND receiveTimestamp>="{_rfc3339(self.frontier_ns - settle_ns)}"'

    def is_new(self, insert_id: str, receive_ns: int) -> bool:
        m = _OUR_ID.match(insert_id)
        if m is not None:
            return self.ours.add(int(m.group(1)), int(m.group(2)))
        if insert_id in self.recent:
            return False
        self.recent[insert_id] = receive_ns
        return True

    def advance(self, newest_ns: int | None, settle_ns: int) -> None:
        if newest_ns is not None and (self.frontier_ns is None or newest_ns > self.frontier_ns):
            self.frontier_ns = newest_ns
        if self.frontier_ns is not None:
            floor = self.frontier_ns - settle_ns
            self.recent = {k: v for k, v in self.recent.items() if v >= floor}


class _Stream:
    """A (log, job) stream as this store has read it: chunks and cumulative counts."""

    def __init__(self, scan: _Scan) -> None:
        self.scan = scan
        self.parts: list[Columns] = []
        self.ends: list[int] = []


class CloudLoggingStore:
    """Events as Cloud Logging entries (see the module docstring for the URL and rules)."""

    def __init__(self, url: str, *, client: Any = None) -> None:
        self.project, self.log, opts = parse_url(url)
        self.url = url
        self.endpoint = opts.get("endpoint") or None
        self.insecure = opts.get("insecure", "false").lower() in ("true", "1")
        self.settle_ns = int(float(opts.get("settle", "30")) * 1e9)
        self.deadline_s = float(opts.get("deadline", "120"))
        self._logging_v2 = _require_logging()  # fail fast when the extra is missing
        self._client = client
        self._owns_client = client is None
        self._lock = threading.RLock()
        self._marks = WriterMarks()  # per log: a crash before a mark only makes ids readers drop
        self._streams: dict[tuple[str, str], _Stream] = {}
        self._jobs_scan: _Scan | None = None
        self._jobs: dict[tuple[str, str], list[float]] = {}
        self.skipped = 0  # entries with a job_name that were not goodput events
        self.retry_initial_s = 0.5
        self.retry_maximum_s = 32.0

    # -- the client ------------------------------------------------------------------
    def _gapic(self) -> Any:
        if self._client is not None:
            return self._client
        from google.cloud.logging_v2.services.logging_service_v2 import LoggingServiceV2Client

        try:
            if self.insecure:
                import grpc
                from google.auth.credentials import AnonymousCredentials
                from google.cloud.logging_v2.services.logging_service_v2.transports import (
                    LoggingServiceV2GrpcTransport,
                )

                endpoint = str(self.endpoint)

                def transport(**kw: Any) -> Any:
                    return LoggingServiceV2GrpcTransport(
                        channel=grpc.insecure_channel(endpoint, options=_CHANNEL_OPTIONS), **kw
                    )

                self._client = LoggingServiceV2Client(
                    credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
                    client_options={"api_endpoint": endpoint},
                    transport=transport,
                )
            else:
                kwargs: dict[str, Any] = {}
                if self.endpoint:
                    kwargs["client_options"] = {"api_endpoint": self.endpoint}
                self._client = LoggingServiceV2Client(**kwargs)
        except Exception as e:  # no credentials, bad endpoint: one clear line
            raise StoreError(f"cannot open Cloud Logging store {self.url}: {e}") from e
        return self._client

    def _retry(self) -> Any:
        from google.api_core import exceptions as ex
        from google.api_core import retry

        return retry.Retry(
            predicate=retry.if_exception_type(
                ex.ResourceExhausted, ex.ServiceUnavailable, ex.DeadlineExceeded, ex.InternalServerError
            ),
            initial=self.retry_initial_s,
            maximum=self.retry_maximum_s,
            multiplier=2.0,
            timeout=self.deadline_s,
        )

    def _call(self, what: str, fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except Exception as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise StoreError(f"Cloud Logging store {self.url}: {what} failed: {msg}") from e

    def log_name(self, namespace: str) -> str:
        if not _LOG_ID.match(namespace):
            raise StoreError(
                f"{self.url}: logger name {namespace!r} is not a valid Cloud Logging log name"
                " (letters, digits and _ . / - only)"
            )
        return f"projects/{self.project}/logs/{urllib.parse.quote(namespace, safe='')}"

    # -- writing ---------------------------------------------------------------------
    def append(self, namespace: str, job: str, batch: EventBatch) -> None:
        """Write each event once as an INFO entry; insertIds `mlgoodput-WRITER-SEQ` make a
        replay from another process recognisable to readers."""
        log_name = self.log_name(namespace)
        with self._lock:
            part = self._marks.new_part(batch, log_name)
            if part is None:
                return
            events = batch.events[part.skip :]
            from google.cloud.logging_v2.types import log_entry
            from google.protobuf import struct_pb2

            entry_cls = log_entry.LogEntry.pb()
            now_ns = time.time_ns()
            first = part.first
            chunk: list[Any] = []
            size = 0
            chunk_first = first
            for i, e in enumerate(events):
                payload = struct_pb2.Struct()
                payload.update(to_payload(job, e))
                entry = entry_cls(
                    insert_id=f"mlgoodput-{batch.writer}-{first + i}", severity=_INFO, json_payload=payload
                )
                entry.timestamp.FromNanoseconds(now_ns)
                n = entry.ByteSize()
                if chunk and (len(chunk) >= MAX_ENTRIES_PER_WRITE or size + n > MAX_BYTES_PER_WRITE):
                    self._write(log_name, chunk)
                    _exactly_once.before_mark(part)
                    self._marks.advance(batch.writer, chunk_first + len(chunk), log_name)
                    chunk_first, chunk, size = chunk_first + len(chunk), [], 0
                chunk.append(entry)
                size += n
            self._write(log_name, chunk)
            _exactly_once.before_mark(part)
            self._marks.advance(batch.writer, chunk_first + len(chunk), log_name)

    def _write(self, log_name: str, entries: list[Any]) -> None:
        from google.cloud.logging_v2.types import logging as logging_types

        req_pb = logging_types.WriteLogEntriesRequest.pb()(log_name=log_name, entries=entries)
        req_pb.resource.type = "global"
        req_pb.resource.labels["project_id"] = self.project
        request = logging_types.WriteLogEntriesRequest(req_pb)
        gapic = self._gapic()
        self._call(
            "WriteLogEntries",
            lambda: gapic.write_log_entries(
                request=request, retry=self._retry(), timeout=min(60.0, self.deadline_s or 60.0)
            ),
        )

    # -- reading ---------------------------------------------------------------------
    def _list(self, scan: _Scan) -> Iterable[Any]:
        """Raw LogEntry messages new to `scan`, following page tokens; advances the scan."""
        from google.cloud.logging_v2.types import logging as logging_types

        request = logging_types.ListLogEntriesRequest(
            resource_names=[f"projects/{self.project}"],
            filter=scan.filter(self.settle_ns),
            order_by="timestamp asc",
            page_size=PAGE_SIZE,
        )
        gapic = self._gapic()
        retry = self._retry()
        pager = self._call(
            "ListLogEntries",
            lambda: gapic.list_log_entries(request=request, retry=retry, timeout=min(60.0, self.deadline_s or 60.0)),
        )
        got: list[Any] = []
        pages = iter(pager.pages)
        while True:
            page = self._call("ListLogEntries", lambda: next(pages, None))
            if page is None:
                break
            got.extend(type(page).pb(page).entries)
        # only a query that got every page changes what the scan has seen
        newest: int | None = None
        out: list[Any] = []
        for entry in got:
            r = entry.receive_timestamp.ToNanoseconds()
            newest = r if newest is None or r > newest else newest
            if scan.is_new(entry.insert_id, r):
                out.append(entry)
        scan.advance(newest, self.settle_ns)
        return out

    def read(self, namespace: str, job: str, cursor: int = 0) -> ReadResult:
        log_name = self.log_name(namespace)
        with self._lock:
            st = self._streams.get((log_name, job))
            if st is None:
                base = f"logName={_quote(log_name)} AND jsonPayload.{JOB_NAME}={_quote(job)}"
                st = self._streams[(log_name, job)] = _Stream(_Scan(base))
            events = []
            for entry in self._list(st.scan):
                payload = {k: _py(v) for k, v in entry.json_payload.fields.items()}
                ev = to_event(payload) if payload.get(JOB_NAME) == job else None
                if ev is None:
                    self.skipped += 1
                    if self.skipped == 1:
                        log.warning(
                            "%s: entry %s of job %r in log %r is not a goodput event; skipping"
                            " such entries (counted in .skipped)",
                            self.url,
                            entry.insert_id,
                            job,
                            namespace,
                        )
                else:
                    events.append(ev)
            if events:
                st.parts.append(Columns.from_events(events))
                st.ends.append((st.ends[-1] if st.ends else 0) + len(events))
            out: list[Columns] = []
            done = 0
            for cols, end in zip(st.parts, st.ends, strict=True):
                if end > cursor:
                    out.append(cols if done >= cursor else cols.slice(cursor - done))
                done = end
            return ReadResult(out, max(cursor, st.ends[-1] if st.ends else 0))

    def jobs(self) -> list[JobInfo]:
        """The (log, job) streams of the log in the URL, or of the whole project; the first
        call reads every goodput entry once, later calls only what is new."""
        with self._lock:
            if self._jobs_scan is None:
                base = f"jsonPayload.{JOB_NAME}:*"
                if self.log is not None:
                    base = f"logName={_quote(self.log_name(self.log))} AND {base}"
                self._jobs_scan = _Scan(base)
            for entry in self._list(self._jobs_scan):
                payload = {k: _py(v) for k, v in entry.json_payload.fields.items()}
                job = payload.get(JOB_NAME)
                ev = to_event(payload)
                if ev is None or not isinstance(job, str):
                    continue
                ns = urllib.parse.unquote(entry.log_name.rsplit("/logs/", 1)[-1])
                info = self._jobs.setdefault((ns, job), [0, ev.time, ev.time])
                info[0] += 1
                info[1] = min(info[1], ev.time)
                info[2] = max(info[2], ev.time)
            return [JobInfo(ns, job, int(v[0]), v[1], v[2]) for (ns, job), v in sorted(self._jobs.items())]

    def close(self) -> None:
        with self._lock:
            if not self._owns_client:
                return
            client, self._client = self._client, None
        transport = getattr(client, "transport", None)
        if transport is not None:
            try:
                transport.close()
            except Exception:
                pass


def _canonical(url: str, arg: str) -> str:
    parse_url(url, arg)  # a malformed URL fails here, with the argument's name
    return url


register(
    StoreBackend(
        "cloudlogging", ("cloudlogging",), CloudLoggingStore, "cloudlogging://PROJECT/LOG_NAME", canonical=_canonical
    )
)
