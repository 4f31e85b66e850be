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


_in_child_attach = False  # True while a multiprocessing child joins as it unpickles (see connect)


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


def _on_sigterm(signum: int, frame: Any) -> None:
    if _leaving:
        return  # already leaving (interrupted at exit): let that finish, it is bounded
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

        if usage:
            Usage.disable()
        disconnect(timeout_s=10.0)
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
