"""Programmatic profiling (`xprof`) and the capture sessions it shares with on-demand profiling.

A session's traces land in `<run profile dir>/plugins/profile/<session>/`, one file set
per process named `<hostname>-<process index>.xplane.pb` (and `.trace.json.gz`), the
layout TensorBoard's profile plugin and XProf read. Processes that start with the same
`session_id` write into the same session directory, which groups several hosts into one
session. Each session is recorded as PROFILE_START/PROFILE_STOP events of the run.
For a remote profile directory (any fsspec URL), the files are first filed on local disk
and uploaded in the background (`_upload`), so a failed upload never loses a trace.
Nothing here raises into the training loop for the state it meets: it warns once per kind.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from mlgoodput import _env, _profiler
from mlgoodput._misuse import misuse
from mlgoodput.diagnostics import _run
from mlgoodput.events import Kind

log = logging.getLogger("mlgoodput.diagnostics")

__all__ = ["Capture", "default_session_id", "xprof"]

F = TypeVar("F", bound=Callable[..., Any])
_SESSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def default_session_id(process_index: int, prefix: str = "") -> str:
    """A session id unique to this process and moment: `[prefix]YYYY_MM_DD_HH_MM_SS_mmm_p<index>`."""
    now = time.time()
    stamp = time.strftime("%Y_%m_%d_%H_%M_%S", time.gmtime(now))
    return f"{prefix}{stamp}_{int(now * 1000) % 1000:03d}_p{process_index}"


def check_session_id(session_id: object, arg: str = "session_id") -> str:
    if not isinstance(session_id, str):
        raise TypeError(f"{arg} must be a string, got {session_id!r}")
    if not _SESSION_RE.match(session_id):
        raise ValueError(f"{arg} must be letters, digits, '.', '_' or '-' (at most 128), got {session_id!r}")
    return session_id


class Capture:
    """One process's part of a profile session: start the trace, stop it, file it, record it."""

    def __init__(self, run: _run.MLRun, session: str, trigger: str) -> None:
        self.run = run
        self.session = check_session_id(session)
        self.trigger = trigger
        self.remote = "://" in run.profile_dir
        self.session_path = f"{run.profile_dir}/plugins/profile/{session}"
        self.files: list[str] = []
        self.local_path: str | None = None  # a remote run: where the trace waits for its upload
        self._staging: Path | None = None
        self._t0 = 0.0

    def begin(self) -> None:
        run = self.run
        tag = f"{self.session}-{os.getpid()}-{secrets.token_hex(3)}"
        try:
            if self.remote:
                staging = Path(tempfile.mkdtemp(prefix=f"mlgoodput-{tag}-"))
            else:
                staging = Path(run.profile_dir) / ".staging" / tag
                staging.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise ValueError(f"cannot write profiles under {run.profile_dir!r}: {e}") from e
        try:
            _profiler.start_trace(staging, owner=self.trigger)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        self._staging = staging
        self._t0 = time.time()
        run.sink.append(
            Kind.PROFILE_START,
            self._t0,
            name=self.session,
            attrs={
                "session": self.session,
                "path": self.session_path,
                "trigger": self.trigger,
                "hostname": run.hostname,
                "pid": os.getpid(),
            },
        )

    def end(self) -> list[str]:
        """Stop the trace, move its files into the session directory and return their paths."""
        staging = self._staging
        if staging is None:
            raise _profiler.ProfilerNotActiveError("this profile was not started")
        self._staging = None
        try:
            produced = _profiler.stop_trace()
            t1 = time.time()
            self.files = self._file_away(produced)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        run = self.run
        attrs: dict[str, object] = {
            "session": self.session,
            "path": self.session_path,
            "trigger": self.trigger,
            "hostname": run.hostname,
            "files": [os.path.basename(f) for f in self.files],
        }
        if self.local_path is not None:
            attrs["local_path"] = self.local_path
        run.sink.append(Kind.PROFILE_STOP, t1, value=t1 - self._t0, name=self.session, attrs=attrs)
        return self.files

    def _file_away(self, produced: Sequence[Path]) -> list[str]:
        run = self.run
        host = f"{run.hostname}-{run.process_index}"
        moves: list[tuple[Path, str]] = []
        for p in produced:
            suffix = next((s for s in _profiler.PROFILE_SUFFIXES if p.name.endswith(s)), None)
            moves.append((p, f"{host}{suffix}" if suffix else p.name))
        out: list[str] = []
        dest = Path(self.session_path) if not self.remote else self._local_dir()
        dest.mkdir(parents=True, exist_ok=True)
        for p, name in moves:
            shutil.move(str(p), dest / name)
            out.append(str(dest / name))
        if not self.remote:
            return out
        # a remote profile directory: the trace is safe on local disk now; upload it in the background
        from mlgoodput.diagnostics._upload import ProfileUploader, UploadJob

        self.local_path = str(dest)
        run = self.run
        up = next((h for h in run.helpers if isinstance(h, ProfileUploader)), None)
        if up is None:
            up = ProfileUploader()
            run.add_helper(up)
        up.submit(UploadJob(self.session, dest, tuple(name for _, name in moves), self.session_path))
        return [f"{self.session_path}/{name}" for _, name in moves]

    def _local_dir(self) -> Path:
        """Where a remote run's trace waits for its upload (and stays if the upload fails)."""
        base = os.environ.get(_env.PROFILE_DIR) or str(_env.data_dir() / "profiles")
        if "://" in base:
            base = str(_env.data_dir() / "profiles")
        return Path(base).expanduser().absolute() / self.run.name / "plugins" / "profile" / self.session


class xprof:
    """Profile a region of the program: `start()`/`stop()`, `with xprof():`, or `@xprof()`.

    `session_id` (here or in `start`) names the session; processes that use the same id
    form one multi-host session. `process_index_list` limits profiling to those process
    indices; elsewhere start and stop do nothing. Never raises into the training loop for
    the state it meets (see `start`); the constructor checks its arguments.
    """

    def __init__(
        self,
        run: _run.MLRun | None = None,
        process_index_list: Sequence[int] | None = None,
        session_id: str | None = None,
    ) -> None:
        if run is not None and not isinstance(run, _run.MLRun):
            hint = " (as a decorator, write @xprof() with parentheses)" if callable(run) else ""
            raise TypeError(f"run must be the MLRun from machinelearning_run, got {run!r}{hint}")
        if process_index_list is not None:
            if isinstance(process_index_list, (str, bytes)) or not isinstance(process_index_list, Sequence):
                raise TypeError(f"process_index_list must be a list of process indices, got {process_index_list!r}")
            for i in process_index_list:
                if isinstance(i, bool) or not isinstance(i, int) or i < 0:
                    raise ValueError(f"process_index_list must hold non-negative ints, got {process_index_list!r}")
        self._run = run
        self.process_index_list = None if process_index_list is None else list(process_index_list)
        self.session_id = None if session_id is None else check_session_id(session_id)
        self._capture: Capture | None = None
        self._quiet_stop = False
        self.files: list[str] = []

    def _misuse(self, call: str, argument: str, value: object, message: str, *, kind: str) -> None:
        run = self._run if self._run is not None else _run.current_run()
        misuse(call, argument, value, message, kind=kind, strict=None if run is None else run.strict)

    def _the_run(self, call: str) -> _run.MLRun | None:
        run = self._run if self._run is not None else _run.current_run()
        if run is None:
            self._misuse(
                call,
                "run",
                None,
                "no active run: call machinelearning_run(name=...) first; not profiling",
                kind="no_run",
            )
        return run

    def start(self, session_id: str | None = None) -> None:
        """Start capturing. Never raises for the state it meets (no run, already started, another
        profile running, a bad session id): it warns once per kind and does not profile."""
        if self._capture is not None:
            self._misuse(
                "xprof.start",
                "session_id",
                session_id,
                "this xprof is already capturing; call stop() first (the call is ignored)",
                kind="twice",
            )
            return
        self._quiet_stop = True  # the stop() paired with a start that did not capture says nothing more
        run = self._the_run("xprof.start")
        if run is None:
            return
        if self.process_index_list is not None and run.process_index not in self.process_index_list:
            return
        if run.metric_only_run:
            log.info("mlgoodput: xprof skipped: run %s is a metric_only_run", run.name)
            return
        sid = session_id if session_id is not None else self.session_id
        if sid is not None:
            try:
                sid = check_session_id(sid)
            except (TypeError, ValueError) as e:
                self._misuse(
                    "xprof.start", "session_id", sid, f"{e}; a generated session id is used", kind="session_id"
                )
                sid = None
        if sid is None:
            sid = default_session_id(run.process_index)
        cap = Capture(run, sid, "programmatic")
        try:
            cap.begin()
        except _profiler.ProfilerBusyError as e:
            self._misuse("xprof.start", "session_id", sid, f"{e} (not profiling)", kind="busy")
            return
        except (OSError, ValueError, RuntimeError) as e:
            self._misuse(
                "xprof.start",
                "session_id",
                sid,
                f"the profiler could not start: {e} (not profiling)",
                kind="start_failed",
            )
            return
        self.session_id = sid
        self._capture = cap
        self._quiet_stop = False

    def stop(self) -> list[str]:
        """Stop capturing; returns the trace files written by this process (empty when it was not
        capturing, which warns once, as the SDK does)."""
        cap = self._capture
        if cap is None:
            quiet, self._quiet_stop = self._quiet_stop, False
            if not quiet:
                self._misuse(
                    "xprof.stop",
                    "self",
                    self,
                    "no profile is being captured by this xprof (nothing to stop)",
                    kind="not_started",
                )
            return []
        self._capture = None
        try:
            self.files = cap.end()
        except (OSError, RuntimeError, ValueError) as e:
            self._misuse(
                "xprof.stop", "session_id", cap.session, f"stopping the profiler failed: {e}", kind="stop_failed"
            )
            self.files = []
        return self.files

    @property
    def session_path(self) -> str | None:
        """The session directory of the current or last capture."""
        run = self._run or _run.current_run()
        if run is None or self.session_id is None:
            return None
        return f"{run.profile_dir}/plugins/profile/{self.session_id}"

    def __enter__(self) -> xprof:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __call__(self, fn: F) -> F:
        """Use as a decorator: every call of `fn` is profiled (a new session each time, unless
        a session_id was given)."""
        fixed = self.session_id

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.session_id = fixed
            self.start()
            try:
                return fn(*args, **kwargs)
            finally:
                self.stop()

        return wrapper  # type: ignore[return-value]
