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
from mlgoodput.diagnostics._configs import load_configs, software_configs, system_configs
from mlgoodput.diagnostics._sink import open_sink
from mlgoodput.events import Kind, check_name
from mlgoodput.export._base import Exporter
from mlgoodput.export._process import ExporterProcess
from mlgoodput.store import Store, open_store, resolve_store_url

log = logging.getLogger("mlgoodput.diagnostics")

#: Environment variables that identify one workload across restarts, first match wins.
WORKLOAD_ID_ENVS = (_env.WORKLOAD_ID, "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

_current: MLRun | None = None
_current_lock = threading.Lock()


def current_run() -> MLRun | None:
    """The run this process records into, or None before `machinelearning_run`."""
    return _current


def require_run(what: str) -> MLRun:
    run = _current
    if run is None:
        raise RuntimeError(f"{what} needs an active run: call machinelearning_run(name=...) first")
    return run


def workload_id_from_env() -> str | None:
    for var in WORKLOAD_ID_ENVS:
        v = os.environ.get(var, "").strip()
        if v and v.lower() != "none":
            return v
    return None


def run_name(name: str, workload_id: str | None, now: float | None = None) -> str:
    """`name-<hash of the workload id>` when there is one (stable across restarts), else
    `name-<UTC time>-<random>` (unique)."""
    if workload_id:
        return f"{name}-{hashlib.sha256(workload_id.encode()).hexdigest()[:8]}"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{name}-{stamp}-{secrets.token_hex(2)}"


def process_index_from_env() -> int:
    v = os.environ.get(_env.PROCESS_INDEX)
    if v:
        try:
            return int(v)
        except ValueError:
            raise ValueError(f"${_env.PROCESS_INDEX} must be an integer, got {v!r}") from None
    if "jax" in sys.modules:
        try:
            import jax

            return int(jax.process_index())
        except Exception:
            pass
    return 0


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
            import fsspec  # noqa: F401
        except ImportError as e:
            raise ImportError(
                f"gcs_path={base!r} needs fsspec (and its backend, e.g. gcsfs): pip install 'mlgoodput[diagnostics]'"
            ) from e
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
    """A machine learning run: what `machinelearning_run` returns. `end()` stops its helpers."""

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
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.name = name
        self.base_name = base_name
        self.run_group = run_group
        self.project = project
        self.region = region
        self.environment = environment
        self.configs = configs
        self.store = store
        self.process_index = process_index
        self.profile_dir = profile_dir
        self.workload_id = workload_id
        self.hostname = socket.gethostname()
        self.clock = clock
        self.sink: Journal = open_sink(store, name, process_index)
        self._append = self.sink.append
        self._feed_put: Callable[[tuple[Any, ...]], None] | None = None
        self._helpers: list[Any] = []  # sampler, on-demand server, exporter feed: closed in reverse
        self.on_demand_address: str | None = None
        self._ended = False

    # -- recording -------------------------------------------------------------------
    def update_configs(self, configs: object) -> None:
        """Add or change user configs (a dict or YAML/JSON path); stored as a RUN_CONFIG event."""
        data = load_configs(configs)
        self.configs.update(data)
        self._append(Kind.RUN_CONFIG, self.clock(), attrs={"configs": data})

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
        for h in reversed(self._helpers):
            try:
                h.close(timeout_s)
            except Exception as e:
                log.warning("mlgoodput: closing %s failed: %s", type(h).__name__, e)
        self.sink.close(timeout_s)  # releases this run's use of the shared journal
        with _current_lock:
            if _current is self:
                _current = None

    def __enter__(self) -> MLRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.end()

    def __repr__(self) -> str:
        return f"MLRun(name={self.name!r}, run_group={self.run_group!r}, process_index={self.process_index})"


def machinelearning_run(
    name: str,
    run_group: str | None = None,
    configs: object = None,
    project: str | None = None,
    region: str | None = None,
    gcs_path: str | os.PathLike[str] | None = None,
    on_demand_xprof: bool = False,
    environment: str = "prod",
    *,
    store: Any = None,
    log_system_metrics: bool = False,
    system_metrics_interval_s: float = 10.0,
    exporters: Sequence[Exporter] | ExporterProcess | None = None,
    on_demand_address: str | None = None,
    workload_id: str | None = None,
    process_index: int | None = None,
) -> MLRun:
    """Start (or, after a restart of the same workload, continue) an ML run in this process.

    `gcs_path` is the base directory or fsspec URL for profiles (default
    `$MLGOODPUT_PROFILE_DIR`, else a local directory). `project`, `region` and
    `environment` are kept as run metadata. Beyond the seed: `store=`, system metrics,
    `exporters=` for metric values, and the on-demand profiling address (default a
    loopback port with a token). See docs/diagnostics.md.
    """
    global _current
    check_name(name, "name")
    if not _NAME_RE.match(name):
        raise ValueError(f"name must be letters, digits, '.', '_' or '-' (at most 128), got {name!r}")
    for arg, v in (("run_group", run_group), ("project", project), ("region", region)):
        if v is not None and not isinstance(v, str):
            raise TypeError(f"{arg} must be a string or None, got {v!r}")
    if not isinstance(environment, str):
        raise TypeError(f"environment must be a string, got {environment!r}")
    if not isinstance(on_demand_xprof, bool) or not isinstance(log_system_metrics, bool):
        raise TypeError("on_demand_xprof and log_system_metrics must be bools")
    if process_index is not None and (isinstance(process_index, bool) or not isinstance(process_index, int) or process_index < 0):
        raise ValueError(f"process_index must be a non-negative int, got {process_index!r}")
    user_configs = load_configs(configs)
    wid = workload_id if workload_id is not None else workload_id_from_env()
    full_name = run_name(name, wid)
    st = open_store(store)
    pidx = process_index if process_index is not None else process_index_from_env()
    profile_dir = resolve_profile_dir(gcs_path, full_name)

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

            sampler = SystemSampler(full_name, pidx, interval_s=system_metrics_interval_s)  # checks psutil now

        with _current_lock:
            prev = _current
        if prev is not None:
            log.info("mlgoodput: ending run %s to start %s", prev.name, full_name)
            prev.end()

        run = MLRun(
            name=full_name, base_name=name, run_group=run_group, project=project, region=region,
            environment=environment, configs=user_configs, store=st, process_index=pidx,
            profile_dir=profile_dir, workload_id=wid,
        )
        if feed is not None:
            run._feed_put = feed.queue.append
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
    if pidx == 0:
        store_arg = "" if st.url == resolve_store_url(None) else f" --store {st.url}"
        print(
            f"mlgoodput: run {full_name}: see it with `mlgoodput runs show {full_name}{store_arg}`;"
            f" profiles under {profile_dir}",
            file=sys.stderr,
        )
    return run


_atexit_done = False


def _register_atexit() -> None:
    global _atexit_done
    if not _atexit_done:
        _atexit_done = True
        atexit.register(_end_at_exit)


def _end_at_exit() -> None:
    run = _current
    if run is not None:
        run.end(timeout_s=5.0)
