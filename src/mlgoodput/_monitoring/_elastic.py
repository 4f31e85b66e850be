"""ElasticGoodputMonitor: GoodputMonitor that can also upload slice efficiency."""

from __future__ import annotations

import datetime
import os
from collections.abc import Sequence
from typing import Any

from mlgoodput._monitoring._monitor import FINAL_FLUSH_TIMEOUT_S, GoodputMonitor
from mlgoodput.export import Exporter, GCPOptions


class ElasticGoodputMonitor(GoodputMonitor):
    """A GoodputMonitor for elastic jobs: `include_slice_efficiency=True` adds the stepping and
    available slice efficiency (`elastic/*_slice_efficiency_pct`) to the cumulative upload.

    Positional arguments in the seed's order (it has no `pathway_enabled`; elastic jobs
    always run on Pathways there)."""

    _elastic = True

    def __init__(
        self,
        job_name: str,
        logger_name: str,
        tensorboard_dir: str | os.PathLike[str] | None = None,
        upload_interval: float = 30,
        monitoring_enabled: bool = False,
        include_badput_breakdown: bool = False,
        include_step_deviation: bool = False,
        include_slice_efficiency: bool = False,
        configured_ideal_step_time: float | None = None,
        step_deviation_interval_seconds: float = 10,
        gcp_options: GCPOptions | None = None,
        skip_final_flush: bool = False,
        final_flush_timeout_seconds: float | None = FINAL_FLUSH_TIMEOUT_S,
        gcs_sync_interval_seconds: int = 3600,
        cache_dir: str = "/tmp",
        max_logs_retention_period: datetime.timedelta | None = None,
        *,
        store: Any = None,
        exporters: Sequence[Exporter] = (),
        stop_timeout_s: float | None = None,
        strict: bool | None = None,
    ) -> None:
        super().__init__(
            job_name,
            logger_name,
            tensorboard_dir,
            upload_interval,
            monitoring_enabled,
            True,  # pathway_enabled: as the seed's elastic monitor
            include_badput_breakdown,
            include_step_deviation,
            configured_ideal_step_time,
            step_deviation_interval_seconds,
            gcp_options,
            skip_final_flush,
            final_flush_timeout_seconds,
            gcs_sync_interval_seconds,
            cache_dir,
            max_logs_retention_period,
            store=store,
            exporters=exporters,
            stop_timeout_s=stop_timeout_s,
            include_slice_efficiency=include_slice_efficiency,
            strict=strict,
        )
