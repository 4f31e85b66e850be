"""`machinelearning_run`: one ML run, its identity, configs and the helpers it starts.

A run is the stream (`mlgoodput.run`, run name) of the store. Its name stays the same
across restarts of one workload (derived from a workload id in the environment) and is
unique otherwise. Every process of a run writes to the same stream with its process
index as the event's host.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mlgoodput import _env
from mlgoodput._journal import Journal
from mlgoodput._worker import exit_time_left
from mlgoodput.diagnostics._configs import load_configs
from mlgoodput.diagnostics._sink import open_sink
from mlgoodput.diagnostics._types import (
    AcceleratorOrchestrator,
    ApplicationFramework,
    ConfigDict,
    Framework,
    RlOrchestrator,
    RunPhase,
    ServingEngine,
)
from mlgoodput.events import Kind
from mlgoodput.identity import detect_identity, workload_id
from mlgoodput.store import Store

log = logging.getLogger("mlgoodput.diagnostics")

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def stream_name(name: str) -> str:
    """`name` as a run (stream) name: runs of other characters become '-', at most 100
    characters, starting with a letter or digit ("<run_name>" becomes "run_name")."""
    safe = _UNSAFE.sub("-", name).strip("-._")[:100].rstrip("-._")
    return safe or "run"


_current: MLRun | None = None
_current_lock = threading.Lock()


def current_run() -> MLRun | None:
    """The run this process records into, or None before `machinelearning_run`."""
    return _current


def set_current_run(run: MLRun | None) -> MLRun | None:
    """Make `run` the one this process records into (`machinelearning_run` does); returns the
    one it replaces."""
    global _current
    with _current_lock:
        prev, _current = _current, run
    return prev


def workload_id_from_env() -> str | None:
    return workload_id()


def run_name(name: str, workload_id: str | None, now: float | None = None) -> str:
    """`name-<hash of the workload id>` when there is one (stable across restarts), else
    `name-<UTC time>-<random>` (unique)."""
    if workload_id:
        return f"{name}-{hashlib.sha256(workload_id.encode()).hexdigest()[:8]}"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{name}-{stamp}-{secrets.token_hex(2)}"


def process_index_from_env() -> int:
    """This process's index, as `mlgoodput.identity.detect_identity()` finds it (the same
    answer the recorder gets)."""
    return detect_identity().process_index


def resolve_profile_dir(gcs_path: str | os.PathLike[str] | None, name: str) -> str:
    """The run's profile directory (or fsspec URL), checked to be writable now."""
    base: str
    if gcs_path is None:
        base = os.environ.get(_env.PROFILE_DIR) or str(_env.data_dir() / "profiles")
    elif isinstance(gcs_path, (str, os.PathLike)):
        base = os.fspath(gcs_path)
        if not base.strip():
            raise ValueError(f"gcs_path must be a directory or a URL, got {gcs_path!r}")
    else:
        raise TypeError(f"gcs_path must be a directory path or a URL such as gs://bucket/dir, got {gcs_path!r}")
    if base.startswith("file://"):
        base = base[len("file://") :]
    if "://" in base:
        try:
            import fsspec
        except ImportError as e:
            raise ImportError(
                f"gcs_path={base!r} needs fsspec (and its backend, e.g. gcsfs): pip install 'mlgoodput[diagnostics]'"
            ) from e
        protocol = base.split("://", 1)[0]
        try:
            fsspec.get_filesystem_class(protocol)  # the backend is importable: fail now, not at upload
        except ImportError as e:
            extra = "mlgoodput[gcs]" if protocol in ("gs", "gcs") else f"the fsspec backend for {protocol}://"
            raise ImportError(f"gcs_path={base!r} needs {extra}: {e}") from e
        except ValueError as e:
            raise ValueError(f"gcs_path={base!r}: {e}") from e
        return base.rstrip("/") + "/" + name
    d = Path(base).expanduser().absolute() / name
    try:
        d.mkdir(parents=True, exist_ok=True)
        probe = d / f".probe-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise ValueError(f"gcs_path: cannot write profiles under {str(d)!r}: {e}") from e
    return str(d)


class MLRun:
    """A machine learning run: what `machinelearning_run` returns. `end()` stops its helpers.

    It has the SDK run's attributes (`name`, `run_group`, `configs`, `gcs_path`, `location`,
    `project`, `run_phase`, `display_name`, ...); `configs` is a `ConfigDict` whose changes
    (`run.configs.update(...)`, `run.configs.batch_size = 64`) are stored with the run.
    """

    def __init__(
        self,
        *,
        name: str,
        base_name: str,
        run_group: str | None,
        project: str | None,
        region: str | None,
        environment: str,
        configs: dict[str, Any],
        store: Store,
        process_index: int,
        profile_dir: str,
        workload_id: str | None,
        gcs_path: str | None = None,
        options: dict[str, Any] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.base_name = base_name
        self.display_name = base_name
        self.run_group = run_group
        self.project = project
        self.region = region
        self.location = region
        self.environment = environment
        self.store = store
        self.process_index = process_index
        self.profile_dir = profile_dir
        self.gcs_path = gcs_path
        self.workload_id = workload_id
        self.hostname = socket.gethostname()
        self.clock = clock
        self.run_phase = RunPhase.PHASE_ACTIVE
        self.created_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))
        opts = options or {}
        self.on_demand_xprof: bool = bool(opts.get("on_demand_xprof", False))
        self.log_system_metrics: bool = bool(opts.get("log_system_metrics", False))
        self.metric_only_run: bool = bool(opts.get("metric_only_run", False))
        self.strict: bool | None = opts.get("strict")  # None: $MLGOODPUT_STRICT at each call
        self.framework: Framework = opts.get("framework", Framework.JAX)
        self.serving_engine: ServingEngine = opts.get("serving_engine", ServingEngine.NONE)
        self.accelerator_orchestrator: AcceleratorOrchestrator = opts.get(
            "accelerator_orchestrator", AcceleratorOrchestrator.NONE
        )
        self.application_framework: ApplicationFramework = opts.get("application_framework", ApplicationFramework.NONE)
        self.rl_orchestrator: RlOrchestrator = opts.get("rl_orchestrator", RlOrchestrator.NONE)
        self.metrics_exporter_config: dict[str, Any] | None = opts.get("metrics_exporter_config")
        self.control_plane_url: str | None = opts.get("base_url")
        self.cluster_id: str | None = opts.get("cluster_id")
        self.orchestrator: str | None = None
        self.ml_run_id: str | None = None
        self.namespace: str | None = None
        self.workload_details: dict[str, Any] | None = None
        self.workload_targets: list[dict[str, Any]] | None = None
        self.sink: Journal = open_sink(store, name, process_index)
        self.configs: ConfigDict = ConfigDict(configs, on_change=self._configs_changed)
        #: hands one sample to the exporters' feed (`machinelearning_run` sets it); None: no exporters
        self.feed_put: Callable[[tuple[Any, ...]], object] | None = None
        self._helpers: list[Any] = []  # sampler, on-demand server, exporter feed: closed in reverse
        self.on_demand_address: str | None = None
        self._ended = False

    # -- helpers ---------------------------------------------------------------------
    def add_helper(self, helper: Any) -> None:
        """A background part of the run (sampler, on-demand server, exporter feed, uploader),
        with `flush(timeout_s)` and `close(timeout_s)`: flushed with the run, closed at its end
        (the last added first)."""
        self._helpers.append(helper)

    @property
    def helpers(self) -> tuple[Any, ...]:
        """The run's helpers, in the order they were added."""
        return tuple(self._helpers)

    # -- recording -------------------------------------------------------------------
    def _configs_changed(self, data: dict[str, Any]) -> None:
        """Store changed configs (set from the training loop: never raises, unless strict)."""
        from mlgoodput._misuse import misuse, shown

        try:
            stored = load_configs(data)
        except Exception as e:  # a value JSON cannot hold (or one whose repr fails): its text, said once
            misuse(
                "MLRun.configs", "configs", data, f"{shown(e)}; stored as text", kind="config_value", strict=self.strict
            )
            stored = {_text(k): _text(v) for k, v in data.items()}
        try:
            self.sink.append(Kind.RUN_CONFIG, self.clock(), attrs={"configs": stored})
        except ValueError as e:  # what the journal cannot hold (an int too long to print)
            misuse(
                "MLRun.configs",
                "configs",
                data,
                f"cannot be journaled ({e}); not stored",
                kind="config_unrecordable",
                strict=self.strict,
            )

    def update_configs(self, configs: object) -> None:
        """Add or change user configs (a dict or a YAML/JSON path or URL); stored as a RUN_CONFIG event."""
        self.configs.update(load_configs(configs))

    def flush(self, timeout_s: float | None = 10.0) -> bool:
        """Wait until recorded events are in the store and samples handed to exporters."""
        ok = self.sink.flush(timeout_s)
        for h in self._helpers:
            ok = h.flush(timeout_s) and ok
        return ok

    def end(self, timeout_s: float | None = 10.0, *, failed: bool = False) -> None:
        """Stop the sampler, the on-demand server and exporters, record how the run ended
        (`failed=True`: it failed) and flush the run's events."""
        global _current
        if self._ended:
            return
        self._ended = True
        self.run_phase = RunPhase.PHASE_FAILED if failed else RunPhase.PHASE_COMPLETED
        try:  # the end as a metadata change of the run: `load_run` derives the status from it
            self.sink.append(Kind.RUN_CONFIG, self.clock(), attrs={"run_phase": self.run_phase.value})
        except Exception as e:  # a closed or broken journal: the run reads as crashed later
            log.warning("mlgoodput: recording the end of run %s failed: %s", self.name, e)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s

        def left() -> float | None:  # one deadline for all the helpers, not one each
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        for h in reversed(self._helpers):
            try:
                h.close(left())
            except Exception as e:
                log.warning("mlgoodput: closing %s failed: %s", type(h).__name__, e)
        self.sink.close(left())  # releases this run's use of the shared journal
        with _current_lock:
            if _current is self:
                _current = None

    def __enter__(self) -> MLRun:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.end(failed=exc_type is not None and not _clean_exit(exc))

    def __repr__(self) -> str:
        return f"MLRun(name={self.name!r}, run_group={self.run_group!r}, process_index={self.process_index})"


def normalize_path(gcs_path: object) -> Any:
    """The SDK's normalization of a `gs://` path: repeated slashes collapsed, no trailing slash."""
    if isinstance(gcs_path, str) and "://" in gcs_path:
        scheme, rest = gcs_path.split("://", 1)
        rest = re.sub("/+", "/", rest).rstrip("/")
        return f"{scheme}://{rest}"
    return gcs_path


_atexit_done = False


def register_atexit() -> None:
    """End the current run at interpreter exit (registered once per process)."""
    global _atexit_done
    if not _atexit_done:
        _atexit_done = True
        atexit.register(_end_at_exit)


def _end_at_exit() -> None:
    import sys

    run = _current
    if run is not None:
        last = getattr(sys, "last_value", None)  # set when an uncaught exception ended the program
        run.end(timeout_s=exit_time_left(), failed=last is not None and not _clean_exit(last))


def _clean_exit(exc: object) -> bool:
    """True for an exception that ends a program successfully (`sys.exit()`, `sys.exit(0)`)."""
    return isinstance(exc, SystemExit) and exc.code in (None, 0)


def _text(value: object) -> str:
    """A config key or value as text, for one JSON cannot hold; never raises."""
    try:
        return value if isinstance(value, str) else repr(value)
    except Exception:
        return f"<{type(value).__name__}>"
