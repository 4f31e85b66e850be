"""A google.logging.v2.LoggingServiceV2 on 127.0.0.1 for tests: WriteLogEntries and
ListLogEntries, with the service's habits that clients must cope with.

It speaks the real wire protocol (the protobuf classes google-cloud-logging ships), so the
real client, ml-goodput-measurement's `_CloudLogger` and Orbax's `CloudLogger` all talk
to it. It assigns `receiveTimestamp` and missing `insertId`s and `timestamp`s, pages with
opaque tokens (default page size 50, at most 1000), evaluates the query-language subset
that clients use (AND / OR / NOT, parentheses, `=` `!=` `<` `<=` `>` `>=` and `:` on
logName, severity, timestamp, receiveTimestamp, insertId, jsonPayload.*, labels.*,
resource.*), rejects bad filters and oversized requests with INVALID_ARGUMENT, and can be
told to fail (`fail_next`), to enforce a read quota (`list_quota`, RESOURCE_EXHAUSTED)
and to hold new entries back from reads for a while (`hold`/`release`), as the real
service does for a few seconds after a write.
"""

from __future__ import annotations

import base64
import bisect
import datetime as _dt
import hashlib
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from typing import Any

_SEVERITY = {
    "DEFAULT": 0,
    "DEBUG": 100,
    "INFO": 200,
    "NOTICE": 300,
    "WARNING": 400,
    "ERROR": 500,
    "CRITICAL": 600,
    "ALERT": 700,
    "EMERGENCY": 800,
}
_SEVERITY_NAME = {v: k for k, v in _SEVERITY.items()}
_TS = re.compile(r"^(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)?$")
_LOG_NAME = re.compile(r"^projects/([^/]+)/logs/([A-Za-z0-9_.%-]+)$")
MAX_REQUEST_BYTES = 10 * 1024 * 1024


class FilterError(ValueError):
    """A filter the fake service cannot parse (the real one answers INVALID_ARGUMENT)."""


def parse_rfc3339(text: str) -> int:
    """Nanoseconds since the epoch of an RFC 3339 time (a missing offset means UTC)."""
    m = _TS.match(text.strip())
    if m is None:
        raise FilterError(f"not a timestamp: {text!r}")
    day, clock, frac, tz = m.groups()
    base = _dt.datetime.fromisoformat(f"{day}T{clock}+00:00")
    if tz and tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        base -= sign * _dt.timedelta(hours=int(tz[1:3]), minutes=int(tz[4:6]))
    return int(base.timestamp()) * 1_000_000_000 + int((frac or "0").ljust(9, "0"))


# -- the query language subset -------------------------------------------------------------
_TOKEN = re.compile(
    r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<op><=|>=|!=|=~|!~|[=<>:()])|(?P<word>\d[^\s()"]*|[^\s()"=<>:!]+))'
)


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise FilterError(f"cannot parse filter at {text[pos:]!r}")
        pos = m.end()
        if m.group("str") is not None:
            out.append(("str", json.loads(m.group("str"))))
        elif m.group("op") is not None:
            out.append(("op", m.group("op")))
        else:
            out.append(("word", m.group("word")))
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return out


Pred = Callable[[Any], bool]


class _Parser:
    def __init__(self, text: str, lookup: Callable[[Any, str], Any]) -> None:
        self.toks = _tokens(text)
        self.i = 0
        self.lookup = lookup

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self) -> tuple[str, str]:
        tok = self.peek()
        if tok is None:
            raise FilterError("unexpected end of filter")
        self.i += 1
        return tok

    def parse(self) -> Pred:
        if not self.toks:
            return lambda e: True
        pred = self.or_expr()
        if self.peek() is not None:
            raise FilterError(f"unexpected {self.peek()[1]!r} in filter")  # type: ignore[index]
        return pred

    def or_expr(self) -> Pred:
        parts = [self.and_expr()]
        while self.peek() == ("word", "OR"):
            self.take()
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else (lambda e: any(p(e) for p in parts))

    def and_expr(self) -> Pred:
        parts = [self.unary()]
        while True:
            tok = self.peek()
            if tok is None or tok == ("op", ")") or tok == ("word", "OR"):
                break
            if tok == ("word", "AND"):
                self.take()
            parts.append(self.unary())  # juxtaposition is AND too
        return parts[0] if len(parts) == 1 else (lambda e: all(p(e) for p in parts))

    def unary(self) -> Pred:
        tok = self.take()
        if tok in (("word", "NOT"), ("word", "-")):
            inner = self.unary()
            return lambda e: not inner(e)
        if tok == ("op", "("):
            inner = self.or_expr()
            if self.take() != ("op", ")"):
                raise FilterError("missing ) in filter")
            return inner
        if tok[0] != "word":
            raise FilterError(f"expected a field name, got {tok[1]!r}")
        field = tok[1]
        op = self.take()
        if op[0] != "op" or op[1] in ("(", ")", "=~", "!~"):
            raise FilterError(f"expected a comparison after {field!r}, got {op[1]!r}")
        kind, value = self.take()
        if kind == "op":
            raise FilterError(f"expected a value after {field} {op[1]}, got {value!r}")
        return self.comparison(field, op[1], value)

    def comparison(self, field: str, op: str, value: str) -> Pred:
        lookup = self.lookup
        if field in ("timestamp", "receiveTimestamp"):
            want: Any = parse_rfc3339(value)
        elif field == "severity":
            if value.upper() not in _SEVERITY:
                raise FilterError(f"unknown severity {value!r}")
            want = _SEVERITY[value.upper()]
        elif field in ("logName", "insertId") or field.split(".")[0] in ("jsonPayload", "labels", "resource"):
            want = value
        else:
            raise FilterError(f"unsupported field {field!r}")

        def test(entry: Any) -> bool:
            have = lookup(entry, field)
            if op == ":":
                if value == "*":
                    return have is not None
                if have is None:
                    return False
                return value in have if isinstance(have, str) else _eq(have, want)
            if have is None:
                return op == "!="
            if op == "=":
                return _eq(have, want)
            if op == "!=":
                return not _eq(have, want)
            a, b = _coerce(have, want)
            if a is None:
                return False
            return bool({"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op])

        return test


def _coerce(have: Any, want: Any) -> tuple[Any, Any]:
    if isinstance(have, (int, float)) and not isinstance(have, bool):
        try:
            return float(have), float(want)
        except (TypeError, ValueError):
            return None, None
    return str(have), str(want)


def _eq(have: Any, want: Any) -> bool:
    if isinstance(have, bool):
        return str(have).lower() == str(want).lower()
    if isinstance(have, (int, float)):
        try:
            return float(have) == float(want)
        except (TypeError, ValueError):
            return False
    return str(have) == str(want)


def _value(v: Any) -> Any:
    kind = v.WhichOneof("kind")
    if kind == "struct_value":
        return v.struct_value
    if kind == "list_value":
        return None
    return None if kind in (None, "null_value") else getattr(v, kind)


@dataclass
class _Stored:
    seq: int
    entry: Any  # a google.logging.v2.LogEntry protobuf
    visible: bool


class FakeLoggingService:
    """A Cloud Logging API on 127.0.0.1 (see the module docstring). `entries()` gives what
    it holds; `list_requests` the (filter, page_token) of each ListLogEntries call;
    `list_returned` the entries each answered; `write_requests` the entry count of each
    WriteLogEntries call; `rejected` the calls it
    refused on purpose (quota, injected failures)."""

    def __init__(self, *, default_page_size: int = 50, max_page_size: int = 1000) -> None:
        self.default_page_size = default_page_size
        self.max_page_size = max_page_size
        self.list_requests: list[tuple[str, str]] = []
        self.write_requests: list[int] = []
        self.list_returned: list[int] = []
        self.rejected: dict[str, int] = {"WriteLogEntries": 0, "ListLogEntries": 0}
        self.holding = False
        self._failures: dict[str, deque[Any]] = {"WriteLogEntries": deque(), "ListLogEntries": deque()}
        self._quota: tuple[int, float] | None = None
        self._list_calls: deque[float] = deque()
        self._stored: list[_Stored] = []
        self._released = 0  # counts release() calls: a cached query result is stale after one
        self._results: dict[str, tuple[tuple[int, int], list[_Stored], list[tuple[int, int]]]] = {}
        self._last_receive_ns = 0
        self._next_id = 0
        self._lock = threading.Lock()
        self._server: Any = None
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"

    def url(self, project: str, log: str | None = None, **options: str) -> str:
        """A `cloudlogging://` store URL that reaches this server."""
        import urllib.parse

        query = urllib.parse.urlencode({"endpoint": self.endpoint, "insecure": "true", **options})
        return f"cloudlogging://{project}" + (f"/{log}" if log else "") + f"?{query}"

    # -- knobs -------------------------------------------------------------------------
    def fail_next(self, method: str, code: Any, times: int = 1, *, later_pages: bool = False) -> None:
        """Answer the next `times` calls of `method` with the grpc.StatusCode `code`
        (`later_pages`: only ListLogEntries calls that carry a page token)."""
        for _ in range(times):
            self._failures[method].append((code, later_pages))

    def pending_failures(self, method: str) -> int:
        """How many injected failures of `method` are still to come."""
        with self._lock:
            return len(self._failures[method])

    def clear_failures(self) -> None:
        with self._lock:
            for q in self._failures.values():
                q.clear()

    def list_quota(self, calls: int | None, period_s: float = 60.0) -> None:
        """At most `calls` ListLogEntries per `period_s` (None: no limit); more get
        RESOURCE_EXHAUSTED, like the service's read quota."""
        self._quota = None if calls is None else (calls, period_s)
        self._list_calls.clear()

    def hold(self) -> None:
        """Entries written from now on are stored but not listed until `release()`."""
        self.holding = True

    def release(self) -> None:
        with self._lock:
            self.holding = False
            self._released += 1
            for s in self._stored:
                s.visible = True

    def entries(self, log_id: str | None = None) -> list[Any]:
        """The stored LogEntry messages (of one log id, if given), in arrival order."""
        with self._lock:
            return [s.entry for s in self._stored if log_id is None or s.entry.log_name.endswith(f"/logs/{log_id}")]

    def payloads(self, log_id: str | None = None) -> list[dict[str, Any]]:
        from google.protobuf import json_format

        return [json_format.MessageToDict(e.json_payload) for e in self.entries(log_id)]

    # -- the service -------------------------------------------------------------------
    @staticmethod
    def _lookup(entry: Any, field: str) -> Any:
        if field == "logName":
            return entry.log_name
        if field == "insertId":
            return entry.insert_id
        if field == "severity":
            return int(entry.severity)
        if field == "timestamp":
            return entry.timestamp.ToNanoseconds()
        if field == "receiveTimestamp":
            return entry.receive_timestamp.ToNanoseconds()
        head, _, rest = field.partition(".")
        if head == "labels":
            return entry.labels.get(rest)
        if head == "resource":
            if rest == "type":
                return entry.resource.type
            sub, _, key = rest.partition(".")
            return entry.resource.labels.get(key) if sub == "labels" else None
        if head == "jsonPayload":
            if entry.WhichOneof("payload") != "json_payload":
                return None
            node: Any = entry.json_payload
            for part in rest.split("."):
                if node is None or not hasattr(node, "fields") or part not in node.fields:
                    return None
                node = _value(node.fields[part])
            return None if hasattr(node, "fields") else node
        return None

    def _maybe_fail(self, method: str, context: Any, page_token: str = "") -> None:
        import grpc

        with self._lock:
            queue = self._failures[method]
            code = None
            if queue and (page_token or not queue[0][1]):
                code = queue.popleft()[0]
            if code is None and method == "ListLogEntries" and self._quota is not None:
                calls, period = self._quota
                now = time.monotonic()
                while self._list_calls and now - self._list_calls[0] > period:
                    self._list_calls.popleft()
                if len(self._list_calls) >= calls:
                    code = grpc.StatusCode.RESOURCE_EXHAUSTED
                else:
                    self._list_calls.append(now)
            if code is not None:
                self.rejected[method] += 1
        if code is not None:
            context.abort(code, f"fake Cloud Logging: {method} answered {code.name}")

    def _write(self, request: Any, context: Any) -> Any:
        import grpc
        from google.cloud.logging_v2.types import logging as logging_types

        self._maybe_fail("WriteLogEntries", context)
        if request.ByteSize() > MAX_REQUEST_BYTES:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "request larger than 10 MB")
        if not request.entries:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no entries")
        staged = []
        for src in request.entries:
            e = type(src)()
            e.CopyFrom(src)
            if not e.log_name:
                e.log_name = request.log_name
            if not _LOG_NAME.match(e.log_name):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"bad log name {e.log_name!r}")
            if not e.HasField("resource"):
                e.resource.CopyFrom(request.resource)
            for k, v in request.labels.items():
                e.labels.setdefault(k, v)
            staged.append(e)
        with self._lock:
            for e in staged:
                now = max(time.time_ns(), self._last_receive_ns + 1000)
                self._last_receive_ns = now
                e.receive_timestamp.FromNanoseconds(now)
                if not e.HasField("timestamp"):
                    e.timestamp.FromNanoseconds(now)
                if not e.insert_id:
                    self._next_id += 1
                    e.insert_id = f"fake{self._next_id:012d}"
                self._stored.append(_Stored(len(self._stored), e, not self.holding))
            self.write_requests.append(len(staged))
        return logging_types.WriteLogEntriesResponse.pb()()

    def _list(self, request: Any, context: Any) -> Any:
        import grpc
        from google.cloud.logging_v2.types import logging as logging_types

        self._maybe_fail("ListLogEntries", context, request.page_token)
        with self._lock:
            self.list_requests.append((request.filter, request.page_token))
        projects = set()
        for name in request.resource_names:
            if not name.startswith("projects/"):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unsupported resource name {name!r}")
            projects.add(name.split("/", 2)[1])
        if not projects:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "resource_names is required")
        order = request.order_by.strip() or "timestamp asc"
        if order not in ("timestamp asc", "timestamp desc"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"unsupported order_by {request.order_by!r}")
        try:
            pred = _Parser(request.filter, self._lookup).parse()
        except FilterError as e:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"invalid filter: {e}")
        size = request.page_size or self.default_page_size
        size = max(1, min(size, self.max_page_size))
        query_key = hashlib.sha256(f"{request.filter}|{order}|{sorted(projects)}".encode()).hexdigest()[:16]
        after: tuple[int, int] | None = None
        if request.page_token:
            try:
                tok = json.loads(base64.urlsafe_b64decode(request.page_token.encode()))
                if tok["q"] != query_key:
                    raise ValueError("token of another query")
                after = (int(tok["t"]), int(tok["s"]))
            except (ValueError, KeyError, TypeError):
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid page_token")
        desc = order == "timestamp desc"

        def key(s: _Stored) -> tuple[int, int]:
            return (s.entry.timestamp.ToNanoseconds(), s.seq)

        with self._lock:
            version = (len(self._stored), self._released)
            cached = self._results.get(query_key)
        if cached is not None and cached[0] == version:
            rows, keys = cached[1], cached[2]  # the next page of a query whose matches have not changed
        else:
            with self._lock:
                version = (len(self._stored), self._released)
                rows = [s for s in self._stored if s.visible]
            rows = [
                s
                for s in rows
                if _LOG_NAME.match(s.entry.log_name).group(1) in projects and pred(s.entry)  # type: ignore[union-attr]
            ]
            rows.sort(key=key, reverse=desc)
            keys = [key(s) for s in rows] if not desc else [(-t, -q) for t, q in map(key, rows)]
            with self._lock:
                self._results = {query_key: (version, rows, keys)}
        start = 0
        if after is not None:
            probe = after if not desc else (-after[0], -after[1])
            start = bisect.bisect_right(keys, probe)
        page, more = rows[start : start + size], len(rows) > start + size
        with self._lock:
            self.list_returned.append(len(page))
        resp = logging_types.ListLogEntriesResponse.pb()()
        for s in page:
            resp.entries.add().CopyFrom(s.entry)
        if more:
            t, q = key(page[-1])
            resp.next_page_token = base64.urlsafe_b64encode(
                json.dumps({"q": query_key, "t": t, "s": q}).encode()
            ).decode()
        return resp

    def start(self) -> FakeLoggingService:
        import grpc
        from google.cloud.logging_v2.types import logging as logging_types

        write_req = logging_types.WriteLogEntriesRequest.pb()
        write_resp = logging_types.WriteLogEntriesResponse.pb()
        list_req = logging_types.ListLogEntriesRequest.pb()
        list_resp = logging_types.ListLogEntriesResponse.pb()
        handler = grpc.method_handlers_generic_handler(
            "google.logging.v2.LoggingServiceV2",
            {
                "WriteLogEntries": grpc.unary_unary_rpc_method_handler(
                    self._write,
                    request_deserializer=write_req.FromString,
                    response_serializer=write_resp.SerializeToString,
                ),
                "ListLogEntries": grpc.unary_unary_rpc_method_handler(
                    self._list,
                    request_deserializer=list_req.FromString,
                    response_serializer=list_resp.SerializeToString,
                ),
            },
        )
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4),
            options=[("grpc.max_receive_message_length", 2 * MAX_REQUEST_BYTES)],
        )
        server.add_generic_rpc_handlers((handler,))
        self.port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._server = server
        return self

    def client(self, project: str) -> Any:
        """A google.cloud.logging.Client for `project` that talks to this server.

        The high-level client builds its gRPC transport itself (TLS, real credentials);
        here it gets a plaintext channel to the fake instead. This is how tests hand
        ml-goodput-measurement's and Orbax's loggers a client of the fake.
        """
        import grpc
        from google.auth.credentials import AnonymousCredentials
        from google.cloud.logging_v2 import _gapic
        from google.cloud.logging_v2.client import Client
        from google.cloud.logging_v2.services.logging_service_v2 import LoggingServiceV2Client
        from google.cloud.logging_v2.services.logging_service_v2.transports import (
            LoggingServiceV2GrpcTransport,
        )

        client = Client(project=project, credentials=AnonymousCredentials(), _use_grpc=True)  # type: ignore[no-untyped-call]
        transport = LoggingServiceV2GrpcTransport(
            channel=grpc.insecure_channel(
                self.endpoint, options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
            )
        )
        client._logging_api = _gapic._LoggingAPI(LoggingServiceV2Client(transport=transport), client)  # type: ignore[no-untyped-call]
        return client

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.stop(0)

    def __enter__(self) -> FakeLoggingService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
