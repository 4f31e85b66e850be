"""`machinelearning_run`: check the arguments, make the MLRun and start its helpers (metric
feed, system sampler, on-demand profiling server). Kept apart from `_run` because those
helpers import `_run` (the run they serve)."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from mlgoodput.diagnostics import _provenance, _run
from mlgoodput.diagnostics._configs import load_configs, software_configs, system_configs
from mlgoodput.diagnostics._errors import MLRunConfigurationError
from mlgoodput.diagnostics._provenance import where
from mlgoodput.diagnostics._run import (
    MLRun,
    normalize_path,
    process_index_from_env,
    register_atexit,
    resolve_profile_dir,
    run_name,
    stream_name,
    workload_id_from_env,
)
from mlgoodput.diagnostics._types import (
    AcceleratorOrchestrator,
    ApplicationFramework,
    Framework,
    RlOrchestrator,
    ServingEngine,
)
from mlgoodput.events import Kind
from mlgoodput.export import Exporter, ExporterProcess
from mlgoodput.store import open_store, resolve_store_url

log = logging.getLogger("mlgoodput.diagnostics")

#: seconds between a run's signs of life while it records nothing (see `load_run`'s status)
ALIVE_S = 10.0


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
    provenance: bool = True,
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
    of warning, for tests; `provenance=False` records no git state, command line or user.
    See docs/diagnostics.md.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a string such as 'training_v1', got {name!r}")
    if not name.strip():
        raise MLRunConfigurationError(f"name is required: a non-empty string such as 'training_v1', got {name!r}")
    if run_group is None:
        run_group = ""
    for arg, v in (
        ("run_group", run_group),
        ("project", project),
        ("region", region),
        ("base_url", base_url),
        ("cluster_id", cluster_id),
        ("run_workload_id", run_workload_id),
    ):
        _check_str(arg, v)
    if not isinstance(environment, str):
        raise TypeError(f"environment must be a string, got {environment!r}")
    for arg, flag in (
        ("on_demand_xprof", on_demand_xprof),
        ("log_system_metrics", log_system_metrics),
        ("metric_only_run", metric_only_run),
    ):
        if not isinstance(flag, bool):
            raise TypeError(f"{arg} must be a bool, got {flag!r}")
    interval = metrics_record_interval_sec if system_metrics_interval_s is None else system_metrics_interval_s
    if isinstance(interval, bool) or not isinstance(interval, (int, float)) or not interval > 0:
        raise MLRunConfigurationError(
            f"metrics_record_interval_sec must be a positive number of seconds, got {interval!r}"
        )
    if metrics_exporter_config is not None and not isinstance(metrics_exporter_config, dict):
        raise TypeError(f"metrics_exporter_config must be a dict or None, got {metrics_exporter_config!r}")
    if strict is not None and not isinstance(strict, bool):
        raise TypeError(f"strict must be a bool or None, got {strict!r}")
    if not isinstance(provenance, bool):
        raise TypeError(f"provenance must be a bool, got {provenance!r}")
    options: dict[str, Any] = {
        "strict": strict,
        "on_demand_xprof": on_demand_xprof,
        "log_system_metrics": log_system_metrics,
        "metric_only_run": metric_only_run,
        "metrics_exporter_config": metrics_exporter_config,
        "base_url": base_url,
        "cluster_id": cluster_id,
        "framework": _enum_arg(Framework, framework, "framework"),
        "serving_engine": _enum_arg(ServingEngine, serving_engine, "serving_engine"),
        "accelerator_orchestrator": _enum_arg(
            AcceleratorOrchestrator, accelerator_orchestrator, "accelerator_orchestrator"
        ),
        "application_framework": _enum_arg(ApplicationFramework, application_framework, "application_framework"),
        "rl_orchestrator": _enum_arg(RlOrchestrator, rl_orchestrator, "rl_orchestrator"),
    }
    if process_index is not None and (
        isinstance(process_index, bool) or not isinstance(process_index, int) or process_index < 0
    ):
        raise ValueError(f"process_index must be a non-negative int, got {process_index!r}")
    if base_url or metrics_exporter_config:
        log.info(
            "mlgoodput: base_url and metrics_exporter_config are kept as run metadata only"
            " (there is no control plane; send metric values elsewhere with exporters=)"
        )
    user_configs = load_configs(configs)
    wid = workload_id if workload_id is not None else (run_workload_id or workload_id_from_env())
    full_name = run_name(stream_name(name), wid)
    st = open_store(store)
    pidx = process_index if process_index is not None else process_index_from_env()
    base_path = normalize_path(gcs_path)
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

        prev = _run.current_run()
        if prev is not None:
            log.info("mlgoodput: ending run %s to start %s", prev.name, full_name)
            prev.end()

        run = MLRun(
            name=full_name,
            base_name=name,
            run_group=run_group,
            project=project,
            region=region,
            environment=environment,
            configs=user_configs,
            store=st,
            process_index=pidx,
            profile_dir=profile_dir,
            workload_id=wid,
            gcs_path=None if base_path is None else os.fspath(base_path),
            options=options,
        )
        if feed is not None:
            run.feed_put = feed.submit
            run.add_helper(feed)
        if on_demand_xprof:
            from mlgoodput.diagnostics._ondemand import OnDemandServer

            server = OnDemandServer(run, address=on_demand_address)
            run.on_demand_address = server.address
            run.add_helper(server)
            server.start()
        preferred = "torch" if run.framework is Framework.PYTORCH else "jax"
        software = software_configs(preferred)
        fact_region, fact_environment = where(region, environment)
        origin = _provenance.provenance(git=True) if provenance else {}
        run.sink.keep_alive(ALIVE_S)  # signs of life: a run that died is told from one that is idle
        run.sink.append(
            Kind.RUN_START,
            run.clock(),
            name=full_name,
            attrs={
                "name": full_name,
                "base_name": name,
                "run_group": run_group,
                "project": project,
                "region": fact_region,
                "environment": fact_environment,
                "workload_id": wid,
                "profile_dir": profile_dir,
                "on_demand": run.on_demand_address,
                "configs": user_configs,
                "software": software,
                "system": system_configs(pidx),
                "framework": software["framework"],
                "metric_only_run": metric_only_run,
                "provenance": origin,
                "alive_s": ALIVE_S,
            },
        )
    except BaseException:
        for helper in (sampler, feed):
            if helper is not None:
                helper.close(5.0)
        if run is not None:
            for h in run.helpers:
                if h is not feed:
                    h.close(5.0)
            run.sink.close(5.0)
        raise
    if sampler is not None:
        sampler.attach(run)
        run.add_helper(sampler)
        sampler.start()
    _run.set_current_run(run)
    register_atexit()
    from mlgoodput.diagnostics import metrics

    metrics.write_pending(run)  # values recorded before any run was active
    if pidx == 0:
        store_arg = "" if st.url == resolve_store_url(None) else f" --store {st.url}"
        print(
            f"mlgoodput: run {full_name}: see it with `mlgoodput runs show {full_name}{store_arg}`;"
            f" profiles under {profile_dir}",
            file=sys.stderr,
        )
    return run
