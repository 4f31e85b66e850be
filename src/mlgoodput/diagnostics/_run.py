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
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mlgoodput import _env
from mlgoodput._journal import Journal
from mlgoodput._worker import exit_time_left
from mlgoodput.diagnostics._configs import load_configs, software_configs, system_configs
from mlgoodput.diagnostics._errors import MLRunConfigurationError
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
from mlgoodput.export._base import Exporter
from mlgoodput.export._process import ExporterProcess
from mlgoodput.identity import detect_identity, workload_id
from mlgoodput.store import Store, open_store, resolve_store_url

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
            "accelerator_orchestrator", AcceleratorOrchestrator.NONE)
        self.application_framework: ApplicationFramework = opts.get(
            "application_framework", ApplicationFramework.NONE)
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
        self._append = self.sink.append
        self.configs: ConfigDict = ConfigDict(configs, on_change=self._configs_changed)
        self._feed_put: Callable[[tuple[Any, ...]], object] | None = None
        self._helpers: list[Any] = []  # sampler, on-demand server, exporter feed: closed in reverse
        self.on_demand_address: str | None = None
        self._ended = False

    # -- recording -------------------------------------------------------------------
    def _configs_changed(self, data: dict[str, Any]) -> None:
        """Store changed configs (set from the training loop: never raises, unless strict)."""
        from mlgoodput._misuse import misuse, shown

        try:
            stored = load_configs(data)
        except Exception as e:  # a value JSON cannot hold (or one whose repr fails): its text, said once
            misuse("MLRun.configs", "configs", data, f"{shown(e)}; stored as text", kind="config_value",
                   strict=self.strict)
            stored = {_text(k): _text(v) for k, v in data.items()}
        try:
            self._append(Kind.RUN_CONFIG, self.clock(), attrs={"configs": stored})
        except ValueError as e:  # what the journal cannot hold (an int too long to print)
            misuse("MLRun.configs", "configs", data, f"cannot be journaled ({e}); not stored",
                   kind="config_unrecordable", strict=self.strict)

    def update_configs(self, configs: object) -> None:
        """Add or change user configs (a dict or a YAML/JSON path or URL); stored as a RUN_CONFIG event."""
        self.configs.update(load_configs(configs))

    def flush(self, timeout_s: float | None = 10.0) -> bool:
        """Wait until recorded events are in the store and samples handed to exporters."""
        ok = self.sink.flush(timeout_s)
        for h in self._helpers:
            ok = h.flush(timeout_s) and ok
        return ok

    def end(self, timeout_s: float | None = 10.0) -> None:
        """Stop the sampler, the on-demand server and exporters, and flush the run's events."""
        global _current
        if self._ended:
            return
        self._ended = True
        self.run_phase = RunPhase.PHASE_COMPLETED
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

    def __exit__(self, *exc: object) -> None:
        self.end()

    def __repr__(self) -> str:
        return f"MLRun(name={self.name!r}, run_group={self.run_group!r}, process_index={self.process_index})"


def _enum_arg(enum_cls: Any, value: object, arg: str) -> Any:
    """An SDK enum argument given as the member or its name (any case), as the SDK accepts it."""
    if value is None:
        return enum_cls.NONE if hasattr(enum_cls, "NONE") else next(iter(enum_cls))
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        try:
            return enum_cls[value.upper()]
        except KeyError:
            pass
    names = ", ".join(m.name for m in enum_cls)
    raise MLRunConfigurationError(f"{arg} must be one of {names} (a {enum_cls.__name__} or its name), got {value!r}")


def _check_str(arg: str, v: object) -> None:
    if v is not None and not isinstance(v, str):
        raise TypeError(f"{arg} must be a string or None, got {v!r}")


def machinelearning_run(
    name: str,
    run_group: str = "",
    configs: object = None,
    gcs_path: str | os.PathLike[str] | None = None,
    base_url: str | None = None,
    cluster_id: str | None = None,
    project: str | None = None,
    region: str | None = "us-central1",
    metrics_record_interval_sec: float = 10.0,
    on_demand_xprof: bool = False,
    log_system_metrics: bool = False,
    environment: str = "prod",
    framework: Framework | str = Framework.JAX,
    serving_engine: ServingEngine | str = ServingEngine.NONE,
    run_workload_id: str | None = None,
    metric_only_run: bool = False,
    metrics_exporter_config: dict[str, Any] | None = None,
    accelerator_orchestrator: AcceleratorOrchestrator | str = AcceleratorOrchestrator.NONE,
    application_framework: ApplicationFramework | str = ApplicationFramework.NONE,
    rl_orchestrator: RlOrchestrator | str = RlOrchestrator.NONE,
    *,
    store: Any = None,
    system_metrics_interval_s: float | None = None,
    exporters: Sequence[Exporter] | ExporterProcess | None = None,
    on_demand_address: str | None = None,
    workload_id: str | None = None,
    process_index: int | None = None,
    strict: bool | None = None,
) -> MLRun:
    """Start (or, after a restart of the same workload, continue) an ML run in this process.

    The parameters are the SDK's, in its order. `gcs_path` is the base directory or fsspec
    URL for profiles (default `$MLGOODPUT_PROFILE_DIR`, else a local directory);
    `metrics_record_interval_sec` is the system-metrics interval; `project`, `region`,
    `environment`, `framework` and the other enums are run metadata; `run_workload_id`
    identifies the workload across restarts. `metric_only_run=True` turns profiling off.
    Keyword-only extras: `store=`, `exporters=` for metric values, the on-demand profiling
    address (default a loopback port with a token), `workload_id`, `process_index`, and
    `strict` (None: `$MLGOODPUT_STRICT`): misuse of `metrics.record`/`xprof` raises instead
    of warning, for tests.
    See docs/diagnostics.md.
    """
    global _current
    if not isinstance(name, str):
        raise TypeError(f"name must be a string such as 'training_v1', got {name!r}")
    if not name.strip():
        raise MLRunConfigurationError(f"name is required: a non-empty string such as 'training_v1', got {name!r}")
    if run_group is None:
        run_group = ""
    for arg, v in (("run_group", run_group), ("project", project), ("region", region),
                   ("base_url", base_url), ("cluster_id", cluster_id), ("run_workload_id", run_workload_id)):
        _check_str(arg, v)
    if not isinstance(environment, str):
        raise TypeError(f"environment must be a string, got {environment!r}")
    for arg, flag in (("on_demand_xprof", on_demand_xprof), ("log_system_metrics", log_system_metrics),
                      ("metric_only_run", metric_only_run)):
        if not isinstance(flag, bool):
            raise TypeError(f"{arg} must be a bool, got {flag!r}")
    interval = metrics_record_interval_sec if system_metrics_interval_s is None else system_metrics_interval_s
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not interval > 0:
        raise MLRunConfigurationError(
            f"metrics_record_interval_sec must be a positive number of seconds, got {interval!r}")
    if metrics_exporter_config is not None and not isinstance(metrics_exporter_config, dict):
        raise TypeError(f"metrics_exporter_config must be a dict or None, got {metrics_exporter_config!r}")
    if strict is not None and not isinstance(strict, bool):
        raise TypeError(f"strict must be a bool or None, got {strict!r}")
    options: dict[str, Any] = {
        "strict": strict,
        "on_demand_xprof": on_demand_xprof, "log_system_metrics": log_system_metrics,
        "metric_only_run": metric_only_run, "metrics_exporter_config": metrics_exporter_config,
        "base_url": base_url, "cluster_id": cluster_id,
        "framework": _enum_arg(Framework, framework, "framework"),
        "serving_engine": _enum_arg(ServingEngine, serving_engine, "serving_engine"),
        "accelerator_orchestrator": _enum_arg(AcceleratorOrchestrator, accelerator_orchestrator,
                                              "accelerator_orchestrator"),
        "application_framework": _enum_arg(ApplicationFramework, application_framework, "application_framework"),
        "rl_orchestrator": _enum_arg(RlOrchestrator, rl_orchestrator, "rl_orchestrator"),
    }
    if process_index is not None and (isinstance(process_index, bool) or not isinstance(process_index, int) or process_index < 0):
        raise ValueError(f"process_index must be a non-negative int, got {process_index!r}")
    if base_url or metrics_exporter_config:
        log.info("mlgoodput: base_url and metrics_exporter_config are kept as run metadata only"
                 " (there is no control plane; send metric values elsewhere with exporters=)")
    user_configs = load_configs(configs)
    wid = workload_id if workload_id is not None else (run_workload_id or workload_id_from_env())
    full_name = run_name(stream_name(name), wid)
    st = open_store(store)
    pidx = process_index if process_index is not None else process_index_from_env()
    base_path = _normalize_path(gcs_path)
    profile_dir = resolve_profile_dir(base_path, full_name)

    if on_demand_xprof:
        from mlgoodput.diagnostics._ondemand import parse_address

        parse_address(on_demand_address)  # a malformed address fails before anything starts
    feed = None
    if exporters:
        from mlgoodput.diagnostics._feed import MetricFeed

        feed = MetricFeed(exporters, {"run": full_name, "host": str(pidx)})
        feed.start()  # raises now if an exporter cannot open
    sampler = None
    run: MLRun | None = None
    try:
        if log_system_metrics:
            from mlgoodput.diagnostics._system import SystemSampler

            sampler = SystemSampler(full_name, pidx, interval_s=float(interval))  # checks psutil now

        with _current_lock:
            prev = _current
        if prev is not None:
            log.info("mlgoodput: ending run %s to start %s", prev.name, full_name)
            prev.end()

        run = MLRun(
            name=full_name, base_name=name, run_group=run_group, project=project, region=region,
            environment=environment, configs=user_configs, store=st, process_index=pidx,
            profile_dir=profile_dir, workload_id=wid,
            gcs_path=None if base_path is None else os.fspath(base_path), options=options,
        )
        if feed is not None:
            run._feed_put = feed.submit
            run._helpers.append(feed)
        if on_demand_xprof:
            from mlgoodput.diagnostics._ondemand import OnDemandServer

            server = OnDemandServer(run, address=on_demand_address)
            run.on_demand_address = server.address
            run._helpers.append(server)
            server.start()
        run._append(
            Kind.RUN_START,
            run.clock(),
            name=full_name,
            attrs={
                "name": full_name,
                "base_name": name,
                "run_group": run_group,
                "project": project,
                "region": region,
                "environment": environment,
                "workload_id": wid,
                "profile_dir": profile_dir,
                "on_demand": run.on_demand_address,
                "configs": user_configs,
                "software": software_configs(),
                "system": system_configs(pidx),
                "framework": run.framework.value,
                "metric_only_run": metric_only_run,
            },
        )
    except BaseException:
        for helper in (sampler, feed):
            if helper is not None:
                helper.close(5.0)
        if run is not None:
            for h in run._helpers:
                if h is not feed:
                    h.close(5.0)
            run.sink.close(5.0)
        raise
    if sampler is not None:
        sampler.attach(run)
        run._helpers.append(sampler)
        sampler.start()
    with _current_lock:
        _current = run
    _register_atexit()
    from mlgoodput.diagnostics import metrics

    metrics._drain_pending(run)  # values recorded before any run was active
    if pidx == 0:
        store_arg = "" if st.url == resolve_store_url(None) else f" --store {st.url}"
        print(
            f"mlgoodput: run {full_name}: see it with `mlgoodput runs show {full_name}{store_arg}`;"
            f" profiles under {profile_dir}",
            file=sys.stderr,
        )
    return run


def _normalize_path(gcs_path: object) -> Any:
    """The SDK's normalization of a `gs://` path: repeated slashes collapsed, no trailing slash."""
    if isinstance(gcs_path, str) and "://" in gcs_path:
        scheme, rest = gcs_path.split("://", 1)
        rest = re.sub("/+", "/", rest).rstrip("/")
        return f"{scheme}://{rest}"
    return gcs_path


_atexit_done = False


def _register_atexit() -> None:
    global _atexit_done
    if not _atexit_done:
        _atexit_done = True
        atexit.register(_end_at_exit)


def _end_at_exit() -> None:
    run = _current
    if run is not None:
        run.end(timeout_s=exit_time_left())


def _text(value: object) -> str:
    """A config key or value as text, for one JSON cannot hold; never raises."""
    try:
        return value if isinstance(value, str) else repr(value)
    except Exception:
        return f"<{type(value).__name__}>"
