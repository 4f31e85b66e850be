"""Standard `logging` into the console: a handler that turns a record into a wire record.

Formatting happens here, in the logging process, so nothing but text crosses the wire:
`%`-style arguments as usual, several messages in one call (`logging.info("a", "b")`)
joined with spaces, and rich objects (a `rich.table.Table`, ...) rendered to ANSI text.
"""

from __future__ import annotations

import io
import logging
import sys
import threading
import traceback
from types import TracebackType
from typing import Any

from mlgoodput.console._client import ConsoleClient
from mlgoodput.console._protocol import MAX_MESSAGE_CHARS, LogRec

_PLAIN = (str, int, float, bool, type(None))


def _is_rich(obj: object) -> bool:
    return hasattr(obj, "__rich_console__") or hasattr(obj, "__rich__")


def render_rich(parts: tuple[Any, ...], width: int = 100) -> tuple[str, str]:
    """Render message parts (some of them rich objects) to (plain text, ANSI text)."""
    from rich.console import Console  # present: the parts are rich objects
    from rich.text import Text

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=True, color_system="truecolor", width=width, highlight=False)
    words: list[str] = []
    for p in parts:  # plain parts share a line; each rich object gets its own lines
        if _is_rich(p):
            if words:
                con.print(Text(" ".join(words)))
                words = []
            con.print(p)
        else:
            words.append(str(p))
    if words:
        con.print(Text(" ".join(words)))
    ansi = buf.getvalue().rstrip("\n")
    return Text.from_ansi(ansi).plain, ansi


def format_message(msg: Any, args: Any) -> tuple[str, str | None]:
    """The text of a record (and its ANSI rendering when it holds rich objects)."""
    if type(msg) is str:
        if not args:
            return msg, None
        if type(args) is tuple:
            for a in args:
                if type(a) not in _PLAIN and _is_rich(a):
                    return render_rich((msg, *args))
        try:
            return msg % args, None
        except (TypeError, ValueError, KeyError):
            parts = args if type(args) is tuple else (args,)
            return " ".join(str(p) for p in (msg, *parts)), None
    parts = (msg, *args) if type(args) is tuple else (msg,)
    if any(_is_rich(p) for p in parts):
        return render_rich(parts)
    if args:
        try:
            return str(msg) % args, None
        except (TypeError, ValueError, KeyError):
            return " ".join(str(p) for p in parts), None
    return str(msg), None


_formatter = logging.Formatter()


class ConsoleLogRecord(logging.LogRecord):
    """A LogRecord whose message also accepts the seed's forms (`logging.info("a", "b")`, rich
    objects), so every handler of the process, not only the console's, can format it."""

    def getMessage(self) -> str:
        return format_message(self.msg, self.args)[0]


class RecordFactory:
    """Installs ConsoleLogRecord as the record factory (or wraps a custom one), reversibly."""

    def __init__(self) -> None:
        self._old: Any = None

    def install(self) -> None:
        if self._old is not None:
            return
        old = logging.getLogRecordFactory()
        self._old = old
        if old is logging.LogRecord:
            logging.setLogRecordFactory(ConsoleLogRecord)
        else:

            def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
                rec = old(*args, **kwargs)
                if type(rec) is logging.LogRecord:
                    rec.__class__ = ConsoleLogRecord
                return rec

            logging.setLogRecordFactory(factory)

    def uninstall(self) -> None:
        if self._old is not None:
            logging.setLogRecordFactory(self._old)
            self._old = None


class ConsoleHandler(logging.Handler):
    """Sends every record it is given to the console; never blocks, never raises."""

    def __init__(self, client: ConsoleClient, level: int = logging.NOTSET) -> None:
        super().__init__(level)
        self.client = client
        self.errors = 0

    def handle(self, record: logging.LogRecord) -> logging.LogRecord | bool:  # type: ignore[override]
        # no handler lock: emit only puts to the client, which never blocks
        if self.filters and not self.filter(record):
            return False
        if record.levelno < logging.WARNING and record.name.startswith("mlgoodput"):
            return False  # our own bookkeeping (recovered journals, ...): a debug log, not the console
        self.emit(record)
        return record

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text, ansi = format_message(record.msg, record.args)
            if len(text) > MAX_MESSAGE_CHARS:
                text = text[:MAX_MESSAGE_CHARS] + " …[cut]"
            if ansi is not None and len(ansi) > 4 * MAX_MESSAGE_CHARS:
                ansi = None
            exc = None
            if record.exc_info:
                exc = _formatter.formatException(record.exc_info)[-MAX_MESSAGE_CHARS:]
            elif record.exc_text:
                exc = record.exc_text
            if record.stack_info:
                exc = (exc + "\n" if exc else "") + record.stack_info
            self.client.put(
                LogRec(record.created, record.levelno, record.name, text, record.pathname, record.lineno, ansi, exc)
            )
        except Exception:
            self.errors += 1


class ExceptionForwarder:
    """Sends uncaught exceptions of the main thread and other threads through `logging`."""

    def __init__(self) -> None:
        self._old_sys: Any = None
        self._old_thread: Any = None
        self._lock = threading.Lock()

    @property
    def installed(self) -> bool:
        return self._old_sys is not None

    def install(self) -> None:
        with self._lock:
            if self._old_sys is not None:
                return
            self._old_sys, self._old_thread = sys.excepthook, threading.excepthook
            sys.excepthook = self._sys_hook
            threading.excepthook = self._thread_hook

    def uninstall(self) -> None:
        with self._lock:
            if self._old_sys is None:
                return
            if sys.excepthook == self._sys_hook:
                sys.excepthook = self._old_sys
            if threading.excepthook == self._thread_hook:
                threading.excepthook = self._old_thread
            self._old_sys = self._old_thread = None

    def _sys_hook(self, t: type[BaseException], e: BaseException, tb: TracebackType | None) -> None:
        if not issubclass(t, KeyboardInterrupt):
            logging.getLogger("mlgoodput.console").critical(
                "uncaught exception: %s", "".join(traceback.format_exception_only(t, e)).strip(), exc_info=(t, e, tb)
            )
        (self._old_sys or sys.__excepthook__)(t, e, tb)

    def _thread_hook(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not SystemExit and args.exc_value is not None:
            name = args.thread.name if args.thread is not None else "?"
            logging.getLogger("mlgoodput.console").critical(
                "uncaught exception in thread %s", name, exc_info=(args.exc_type, args.exc_value, args.exc_traceback)
            )
        (self._old_thread or threading.__excepthook__)(args)
