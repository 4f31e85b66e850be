"""Joining and leaving a console: `connect`, `disconnect`, `session`, and children that join alone.

A connected process sends its `logging` records, progress bars and usage samples to the
server. `session()` starts a server for a local multi-process job and makes every child
process (spawn, forkserver or fork; pools and concurrent.futures included) connect by itself:
the connection settings ride along in the environment and in the `multiprocessing`
process object, whose unpickling in a spawned child connects it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import multiprocessing
import multiprocessing.util
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

from mlgoodput import _env
from mlgoodput._worker import exit_time_left
from mlgoodput.console import _current
from mlgoodput.console._client import ConsoleClient
from mlgoodput.console._logging import ConsoleHandler, ExceptionForwarder, RecordFactory

_lock = threading.RLock()
_handler: ConsoleHandler | None = None
_forwarder = ExceptionForwarder()
_factory = RecordFactory()
_old_root_level: int | None = None
_leaving = False
_CONFIG_KEY = "mlgoodput_console"


#: The longest a `session()` takes to end: the last records are delivered to the server and
#: made durable (stored, or journaled when the store cannot take them), within this.
SESSION_EXIT_S = 10.0

_in_child_attach = False  # True while a multiprocessing child joins as it unpickles (see connect)
_term_pending = False  # a SIGTERM came while leaving: end by it once left (see _on_sigterm)


def connect(
    address: str | None = None,
    *,
    token: str | None = None,
    level: int = logging.INFO,
    forward_exception: bool = True,
    max_buffer: int = 200_000,
) -> ConsoleClient:
    """Join the console at `address` (None: $MLGOODPUT_CONSOLE); `token` (None: $MLGOODPUT_CONSOLE_TOKEN)
    is needed for TCP. Installs a `logging` handler on the root logger (lowering its level to
    `level` if needed) and, with `forward_exception`, sends uncaught exceptions too."""
    global _handler, _old_root_level
    if address is None:
        address = os.environ.get(_env.CONSOLE)
        if not address:
            raise ValueError(f"address is None and ${_env.CONSOLE} is not set: give the console server's address")
    if token is None:
        token = os.environ.get(_env.CONSOLE_TOKEN) or None
    if not isinstance(level, int):
        raise TypeError(f"level must be a logging level number, got {level!r}")
    with _lock:
        if _current.client is not None:
            disconnect(timeout_s=5.0)
        client = ConsoleClient(address, token=token, max_buffer=max_buffer)
        if not _in_child_attach:
            # a refusal (wrong or missing token) is a configuration error: raise here. Not in a
            # multiprocessing child joining as it starts: a Pool.terminate() SIGTERM must find
            # it connected in the background with its handler installed, not mid-handshake.
            client.handshake()
        client.start()
        from mlgoodput.console import _progress

        client.tickers.append(_progress.flush_dirty)
        handler = ConsoleHandler(client)
        root = logging.getLogger()
        root.addHandler(handler)
        _factory.install()
        if root.level == logging.NOTSET or root.level > level:
            _old_root_level = root.level
            root.setLevel(level)
        if forward_exception:
            _forwarder.install()
        _current.client, _handler = client, handler
        # what children need to join: the environment (any child) and the process object (multiprocessing)
        os.environ[_env.CONSOLE] = client.address
        if token:
            os.environ[_env.CONSOLE_TOKEN] = token
        multiprocessing.current_process()._config[_CONFIG_KEY] = _Attach(  # type: ignore[attr-defined]
            client.address, token, level, forward_exception
        )
        multiprocessing.util.register_after_fork(client, _in_mp_child)
    usage = os.environ.get(_env.CONSOLE_USAGE)
    if usage:
        from mlgoodput.console._usage import Usage

        try:
            Usage.enable(float(usage))
        except (ValueError, ImportError) as e:
            logging.getLogger("mlgoodput.console").warning("usage sampling not started: %s", e)
    return client


def disconnect(timeout_s: float = 10.0) -> bool:
    """Leave the console, delivering everything still buffered (up to `timeout_s`); True if all was."""
    global _handler, _old_root_level, _leaving
    with _lock:
        client, handler = _current.client, _handler
        if client is None:
            return True
        _leaving = True
        from mlgoodput.console import _progress

        _progress.flush_dirty(force=True)
        ok = client.drain(timeout_s)
        root = logging.getLogger()
        if handler is not None:
            root.removeHandler(handler)
        if _old_root_level is not None:
            root.setLevel(_old_root_level)
            _old_root_level = None
        _forwarder.uninstall()
        _factory.uninstall()
        client.close(1.0)
        _current.client = _handler = None
        multiprocessing.current_process()._config.pop(_CONFIG_KEY, None)  # type: ignore[attr-defined]
        _leaving = False
    if _term_pending:  # a SIGTERM came while this call delivered: end by it now
        _sigterm_ends_again()
    return ok


class _Attach:
    """Rides inside multiprocessing's process object; unpickled in a spawned child, it connects."""

    def __init__(self, address: str, token: str | None, level: int, forward_exception: bool) -> None:
        self.args = (address, token, level, forward_exception)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_attach, self.args)


def _attach(address: str, token: str | None, level: int, forward_exception: bool) -> _Attach:
    """Runs in a spawned or forkserver child while multiprocessing unpickles its process."""
    global _in_child_attach
    try:
        if _current.client is None:
            _in_child_attach = True
            try:
                client = connect(address, token=token, level=level, forward_exception=forward_exception)
            finally:
                _in_child_attach = False
            _in_mp_child(client)  # spawn and forkserver children do not run the after-fork hooks
    except Exception as e:  # a child must start even if the console cannot be joined
        logging.getLogger("mlgoodput.console").warning("could not join the console at %s: %s", address, e)
    return _Attach(address, token, level, forward_exception)


def _in_mp_child(client: ConsoleClient) -> None:
    """Runs in a multiprocessing child before its target: deliver at its end (it leaves by
    os._exit, so atexit does not run) and on the SIGTERM of Pool.terminate()."""
    multiprocessing.util.Finalize(None, _leave_at_exit, exitpriority=100)
    if _forwarder.installed:
        _forward_process_errors()
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)  # Pool.terminate() ends workers with SIGTERM
        _watch_sigterm()


#: the write end of this process's signal wakeup pipe, when it is ours (see _watch_sigterm)
_wakeup_w = -1
_handler_ran = threading.Event()


def _watch_sigterm() -> None:
    """A backstop for `_on_sigterm`: Python runs a handler only in the main thread, between
    bytecodes. A Pool worker's main thread blocked in C never gets there: waiting for the
    task queue's lock, which the terminating parent holds, it sleeps on with the SIGTERM
    caught and the handler pending forever, and Pool.terminate() joins it with no timeout.
    The C handler also writes the signal's number to the wakeup fd; a thread reading it ends
    the process itself (after delivering, as the handler would) when the handler did not run."""
    global _wakeup_w
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        old = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except (ValueError, OSError):
        old = -2
    if old not in (-1, _wakeup_w):  # someone else's wakeup fd (an event loop): leave it be
        if old != -2:
            signal.set_wakeup_fd(old)
        os.close(r)
        os.close(w)
        return
    _wakeup_w = w
    _handler_ran.clear()
    threading.Thread(target=_sigterm_watcher, args=(r,), name="mlgoodput-console-sigterm-watch", daemon=True).start()


def _sigterm_watcher(r: int) -> None:
    while True:
        try:
            data = os.read(r, 64)
        except OSError:
            return
        if not data:
            return
        # only while SIGTERM is still ours: a handler the program put in its place decides alone
        if signal.SIGTERM in data and not _handler_ran.wait(1.0) and signal.getsignal(signal.SIGTERM) is _on_sigterm:
            t = threading.Thread(target=_leave_at_exit, name="mlgoodput-console-sigterm", daemon=True)
            t.start()
            t.join(3.0)
            os._exit(128 + signal.SIGTERM)


def _forward_process_errors() -> None:
    """multiprocessing prints a child's uncaught exception itself (no excepthook): log it first."""
    from multiprocessing.process import BaseProcess

    run = BaseProcess.run
    if getattr(run, "_mlgoodput", False):
        return

    def forwarding_run(self: BaseProcess) -> None:
        try:
            run(self)
        except BaseException as e:
            if not isinstance(e, (SystemExit, KeyboardInterrupt)):
                logging.getLogger("mlgoodput.console").critical(
                    "uncaught exception in process %s: %r", self.name, e, exc_info=True
                )
            raise

    forwarding_run._mlgoodput = True  # type: ignore[attr-defined]
    BaseProcess.run = forwarding_run  # type: ignore[method-assign]


def _leave_at_exit() -> None:
    try:
        disconnect(timeout_s=exit_time_left())
    except Exception:
        pass
    _sigterm_ends_again()


def _sigterm_ends_again() -> None:
    """After leaving, nothing is left to deliver: give SIGTERM back its default, so that the
    SIGTERM of Pool.terminate() ends this child at once. Kept, our Python handler would never
    run once the interpreter finalizes (a spawned child does, seconds on a loaded machine), and
    Pool.terminate() waits on the child without a timeout. A SIGTERM that came while leaving
    ends the process now."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) is not _on_sigterm:
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if _term_pending:
        os.kill(os.getpid(), signal.SIGTERM)


def _on_sigterm(signum: int, frame: Any) -> None:
    global _term_pending
    _handler_ran.set()
    if _leaving:
        _term_pending = True  # already leaving (interrupted at exit): let that finish, it is bounded
        return
    # An orderly end (Pool.terminate): deliver, then say goodbye. On another thread, because
    # the interrupted main thread may hold a lock that delivering needs; bounded either way.
    try:
        t = threading.Thread(target=_leave_at_exit, name="mlgoodput-console-sigterm", daemon=True)
        t.start()
        t.join(3.0)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


atexit.register(_leave_at_exit)


@contextlib.contextmanager
def session(
    address: str | None = None,
    *,
    job: str | None = None,
    store: Any = None,
    token: str | None = None,
    display: bool | IO[str] = True,
    level: int = logging.INFO,
    forward_exception: bool = True,
    usage: bool | float = False,
    store_process: bool = False,
) -> Iterator[Any]:
    """Start a console server for this job and connect this process and its children to it.

    `address` None: a Unix socket in the private per-user directory. `usage`: True or an
    interval in seconds to sample resource usage of every process. `store_process`: write
    the store from a helper process (for jobs that log many thousands of lines a second).
    Yields the server.
    """
    from mlgoodput.console._server import ConsoleServer

    if address is None:
        address = f"session-{os.getpid()}"
    server = ConsoleServer(address, job=job, store=store, token=token, display=display, store_process=store_process)
    server.start()
    saved = {k: os.environ.get(k) for k in (_env.CONSOLE, _env.CONSOLE_TOKEN, _env.CONSOLE_USAGE)}
    try:
        if usage:
            from mlgoodput.console._usage import Usage

            Usage.enable(1.0 if usage is True else float(usage))
        client = connect(server.address, token=server.token, level=level, forward_exception=forward_exception)
        # short ids go in order of joining: let this process join before any child can, so
        # the job's main process is #0 (a local socket answers in milliseconds)
        deadline = time.monotonic() + 5.0
        while client.process is None and time.monotonic() < deadline:
            client.wake()
            time.sleep(0.002)
        yield server
    finally:
        from mlgoodput.console._usage import Usage

        deadline = time.monotonic() + SESSION_EXIT_S  # one deadline for leaving and stopping
        if usage:
            Usage.disable()
        disconnect(timeout_s=SESSION_EXIT_S - 1.0)
        server.stop(timeout_s=max(0.5, deadline - time.monotonic()))
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
