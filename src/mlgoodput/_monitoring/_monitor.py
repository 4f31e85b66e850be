"""GoodputMonitor: the seed's monitoring API, uploading from a background process."""

from __future__ import annotations

import datetime
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

from mlgoodput import _env
from mlgoodput._gcp_metadata import on_google_cloud
from mlgoodput._misuse import MisuseReporter, first_warning, resolve_strict
from mlgoodput._monitoring._source import GoodputSource
from mlgoodput.accounting import retention_period
from mlgoodput.export import (
    CloudMonitoringExporter,
    Exporter,
    ExporterError,
    ExporterProcess,
    GCPOptions,
    StopHandle,
    make_exporter,
)
from mlgoodput.store import is_process_local, resolve_store_url

log = logging.getLogger("mlgoodput")

#: The seed's default bound on the final upload when an uploader stops (seconds).
FINAL_FLUSH_TIMEOUT_S = 10.0
#: What `final_flush_timeout_seconds=None` ("wait until it is done") waits at most: a day.
UNBOUNDED_FLUSH_S = 86400.0

#: TensorBoard scalars go to this subdirectory of `tensorboard_dir`, as in the seed library.
TENSORBOARD_SUBDIR = "goodput"

_CUMULATIVE, _ROLLING, _INTERVAL, _STEP_DEVIATION = "cumulative", "rolling", "interval", "step_deviation"
_KEYS = (_CUMULATIVE, _ROLLING, _INTERVAL, _STEP_DEVIATION)
#: The public method names of each uploader (what a misuse warning names: the call the user made).
_PUBLIC = {
    _CUMULATIVE: "goodput",
    _ROLLING: "rolling_window_goodput",
    _INTERVAL: "goodput_interval",
    _STEP_DEVIATION: "step_deviation",
}


def _check_seconds(value: object, arg: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{arg} must be a number of seconds, got {value!r}")
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"{arg} must be a positive number of seconds, got {value!r}")
    return float(value)


def _check_windows(windows: object, arg: str) -> tuple[int, ...]:
    if isinstance(windows, (str, bytes)) or not isinstance(windows, Sequence) or not windows:
        raise TypeError(f"{arg} must be a non-empty list of window sizes in seconds, got {windows!r}")
    out = []
    for w in windows:
        if isinstance(w, bool) or not isinstance(w, (int, float)) or w != int(w):
            raise TypeError(f"{arg} must hold whole numbers of seconds, got {w!r} in {windows!r}")
        if w <= 0:
            raise ValueError(f"{arg} must hold positive window sizes, got {w!r} in {windows!r}")
        out.append(int(w))
    return tuple(sorted(set(out)))


class GoodputMonitor:
    """Query a job's goodput when an uploader starts, then every `upload_interval`, and
    upload it to the configured exporters.

    All querying and uploading happens in one background process per monitor (an
    `ExporterProcess`): the training process only starts and stops it. That process owns
    its own calculator (its own cursor into the store), so each interval reads only new
    events. Exporters: `tensorboard_dir` (seed meaning: scalars under `<dir>/goodput`),
    `gcp_options` (adds a CloudMonitoringExporter when it enables any GCP metric) and any
    objects from `mlgoodput.export` in `exporters`.

    A `stop_*` returns at once (well under 100 ms): a job that stops its monitor right
    before it records its end is not charged for the final upload. The request is sent
    before it returns, so the final upload starts at once and reads everything stored by
    then; it finishes in the background within the stop's timeout, and the interpreter
    waits for it at exit (up to that timeout). `wait_for_final_uploads()` waits for it
    and says whether it went out.
    """

    _elastic = False

    def __init__(
        self,
        job_name: str,
        logger_name: str,
        tensorboard_dir: str | os.PathLike[str] | None = None,
        upload_interval: float = 30,
        monitoring_enabled: bool = False,
        pathway_enabled: bool = False,
        include_badput_breakdown: bool = False,
        include_step_deviation: bool = False,
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
        include_slice_efficiency: bool = False,
        strict: bool | None = None,
    ) -> None:
        for arg, v in (("job_name", job_name), ("logger_name", logger_name)):
            if not isinstance(v, str) or not v.strip():
                raise ValueError(f"{arg} must be a non-empty string, got {v!r}")
        self.job_name = job_name
        self.logger_name = logger_name
        self.strict = resolve_strict(strict)
        self._misuse = MisuseReporter(type(self).__name__, self.strict)
        self.upload_interval = _check_seconds(upload_interval, "upload_interval")
        self.step_deviation_interval_seconds = _check_seconds(
            step_deviation_interval_seconds, "step_deviation_interval_seconds"
        )
        if final_flush_timeout_seconds is None:
            self.final_flush_timeout_seconds: float | None = None  # the seed's "wait for it"
        else:
            self.final_flush_timeout_seconds = _check_seconds(
                final_flush_timeout_seconds, "final_flush_timeout_seconds"
            )
        if stop_timeout_s is not None:
            self.stop_timeout_s = _check_seconds(stop_timeout_s, "stop_timeout_s")
        else:
            self.stop_timeout_s = self.final_flush_timeout_seconds or UNBOUNDED_FLUSH_S
        self.gcs_sync_interval_seconds = _check_seconds(gcs_sync_interval_seconds, "gcs_sync_interval_seconds")
        if not isinstance(cache_dir, (str, os.PathLike)):
            raise TypeError(f"cache_dir must be a path string, got {cache_dir!r}")
        max_logs_retention_period = retention_period(max_logs_retention_period)
        # The seed's cache and Cloud Logging retention knobs: our uploader reads the store
        # incrementally and keeps no cache files, so they are kept for introspection only.
        self.cache_dir = cache_dir
        self.max_logs_retention_period = max_logs_retention_period
        if configured_ideal_step_time is not None:
            configured_ideal_step_time = _check_seconds(configured_ideal_step_time, "configured_ideal_step_time")
        if gcp_options is not None and not isinstance(gcp_options, GCPOptions):
            raise TypeError(f"gcp_options must be a GCPOptions or None, got {gcp_options!r}")
        self.monitoring_enabled = bool(monitoring_enabled)
        self.pathway_enabled = bool(pathway_enabled)  # accepted for the seed's API; no effect on our accounting
        self.include_badput_breakdown = bool(include_badput_breakdown)
        self.include_step_deviation = bool(include_step_deviation)
        self.include_slice_efficiency = bool(include_slice_efficiency)
        self.configured_ideal_step_time = configured_ideal_step_time
        self.skip_final_flush = bool(skip_final_flush)
        self.gcp_options = gcp_options
        if store is not None and not isinstance(store, (str, os.PathLike)):
            url = getattr(store, "url", None)
            if not isinstance(url, str):
                raise TypeError(f"store must be a URL, a path or a store with a .url, got {store!r}")
            store = url
        self.store_url = resolve_store_url(store)
        if is_process_local(self.store_url):
            raise ValueError(
                f"store: the uploader runs in another process and cannot see {self.store_url!r}; use a SQLite file"
            )
        all_exporters: list[Exporter] = []
        if tensorboard_dir is not None and os.fspath(tensorboard_dir):
            all_exporters.append(
                make_exporter(
                    "tensorboard", logdir=os.path.join(os.fspath(tensorboard_dir), TENSORBOARD_SUBDIR), exclusive=True
                )
            )
        if (
            gcp_options is not None
            and gcp_options.enabled
            and not any(isinstance(e, CloudMonitoringExporter) for e in exporters)
        ):
            g = gcp_options
            if not include_step_deviation and g.enable_gcp_step_deviation_metrics:
                import dataclasses

                g = dataclasses.replace(g, enable_gcp_step_deviation_metrics=False)
            all_exporters.append(make_exporter("gcp", gcp_options=g))
        if isinstance(exporters, (str, bytes)) or not isinstance(exporters, Sequence):
            raise TypeError(f"exporters must be a list of exporters from mlgoodput.export, got {exporters!r}")
        all_exporters.extend(exporters)
        self.exporters = all_exporters
        self._proc: ExporterProcess | None = None
        self._sources: dict[str, GoodputSource] = {}  # the last source each uploader ran
        self._final: list[StopHandle] = []  # final uploads going on in the background
        self._retiring: list[StopHandle] = []  # uploader processes still ending
        self._final_failed = 0  # final uploads that did not complete since the last wait
        if self.monitoring_enabled:
            if not all_exporters:
                log.warning("GoodputMonitor(%s): no exporters configured; nothing will be uploaded", job_name)
            if gcp_options is None and not any(isinstance(e, CloudMonitoringExporter) for e in exporters):
                _say_no_cloud_monitoring(job_name)
            self._proc = self._new_process()
        else:
            log.info("GoodputMonitor(%s): monitoring_enabled is False; the uploaders do nothing", job_name)

    # -- internals -----------------------------------------------------------------------
    def _source(self, mode: str, windows: tuple[int, ...] = ()) -> GoodputSource:
        return GoodputSource(
            job_name=self.job_name,
            logger_name=self.logger_name,
            store_url=self.store_url,
            mode=mode,
            windows_s=windows,
            include_badput_breakdown=self.include_badput_breakdown or mode in (_ROLLING,),
            include_step_deviation=self.include_step_deviation and mode == _CUMULATIVE,
            include_slice_efficiency=self.include_slice_efficiency and self._elastic,
            configured_ideal_step_time=self.configured_ideal_step_time,
        )

    def _start(self, key: str, source: GoodputSource) -> None:
        proc = self._proc
        if proc is None:
            return
        if self._retiring and not any(proc.has_source(k) for k in _KEYS):
            # an uploader process this monitor stopped may still be making its final upload
            # (and hold the TensorBoard folder): it ends first, by its deadline at the latest
            for h in self._retiring:
                h.wait()
            self._retiring = []
        if proc.has_source(key):
            self._misuse.report(
                "uploader_started_twice",
                f"start_{_PUBLIC[key]}_uploader",
                "job_name",
                self.job_name,
                f"the {key} goodput uploader of job {self.job_name!r} is already running; the call did nothing",
            )
            return
        try:
            proc.start()  # raises for a configuration error only; a backend that fails is retried
        except ExporterError as e:  # the uploader process could not start: warned, never raised
            log.warning("GoodputMonitor(%s): the %s uploader could not start: %s", self.job_name, key, e)
            return
        proc.add_source(key, source)
        self._sources[key] = source
        log.info("GoodputMonitor(%s): %s uploader started (process %s)", self.job_name, key, proc.pid)

    def _stop(self, key: str, skip_final_flush: bool | None, timeout_s: float | None) -> bool:
        """Hand the stop (and its final upload) to the uploader process and return at once:
        the message is sent here, the rest happens in the background (export's finisher)."""
        proc = self._proc
        if proc is None:
            return True
        skip = self.skip_final_flush if skip_final_flush is None else skip_final_flush
        timeout = self._stop_timeout(key, timeout_s)
        if not proc.has_source(key):
            source = self._sources.get(key) or (self._source(key) if key in (_CUMULATIVE, _STEP_DEVIATION) else None)
            cold = not skip and source is not None
            self._misuse.report(
                "uploader_not_running",
                f"stop_{_PUBLIC[key]}_uploader",
                "job_name",
                self.job_name,
                f"the {key} goodput uploader of job {self.job_name!r} is not running;"
                + (" one final upload, as the seed does" if cold else " the call did nothing"),
            )
            if not cold:
                return True
            assert source is not None
            if not any(proc.has_source(k) for k in _KEYS):
                # the seed's cold final flush: a process of its own, started in the background
                self._proc = self._new_process()
                return self._track(key, timeout, proc.upload_once_in_background(key, source, timeout), retiring=True)
            try:  # another uploader runs: one more source in its process, removed with a final upload
                proc.add_source(key, source, upload_now=False)
            except Exception as e:  # a stop never raises into the caller for a backend
                log.warning("GoodputMonitor(%s): the final %s upload could not start: %s", self.job_name, key, e)
                return False
        if any(proc.has_source(k) for k in _KEYS if k != key):
            handle = proc.remove_source_in_background(key, final=not skip, timeout_s=timeout)
            return self._track(key, timeout, handle, retiring=False)
        # the last uploader of this process: the process ends after the final upload
        self._proc = self._new_process()
        return self._track(key, timeout, proc.stop_in_background(timeout, final_flush=not skip), retiring=True)

    def _stop_timeout(self, key: str, timeout_s: object) -> float:
        """`timeout_s`, or the monitor's stop timeout for None; a bad value is misuse (warned
        once, never raised into training) and the default is used."""
        if timeout_s is None:
            return self.stop_timeout_s
        if isinstance(timeout_s, (int, float)) and not isinstance(timeout_s, bool) and 0 <= timeout_s < float("inf"):
            return float(timeout_s)
        self._misuse.report(
            "bad_timeout",
            f"stop_{_PUBLIC[key]}_uploader",
            "timeout_s",
            timeout_s,
            f"timeout_s must be a number of seconds >= 0; using {self.stop_timeout_s:g} s",
        )
        return self.stop_timeout_s

    def _new_process(self) -> ExporterProcess:
        return ExporterProcess(
            self.exporters, interval_s=self.upload_interval, name=f"mlgoodput-monitor-{self.job_name}"
        )

    def _track(self, key: str, timeout: float, handle: StopHandle, *, retiring: bool) -> bool:
        """Keep a background stop until it is over; a final upload that fails is logged then.
        True when the stop reached the uploader process."""
        self._final = [h for h in self._final if not self._settled(h)]
        self._final.append(handle)
        if retiring:
            self._retiring = [h for h in self._retiring if not h.done]
            self._retiring.append(handle)

        def said(ok: bool) -> None:
            if not ok:
                log.warning(
                    "GoodputMonitor(%s): the final %s upload did not complete in %.1f s", self.job_name, key, timeout
                )

        handle.add_done_callback(said)
        if not handle.sent:
            log.warning("GoodputMonitor(%s): the %s uploader could not be reached to stop it", self.job_name, key)
        return handle.sent

    def _settled(self, h: StopHandle) -> bool:
        """True for a handle that is over (a failure is counted for `wait_for_final_uploads`)."""
        if not h.done:
            return False
        if not h.ok:
            self._final_failed += 1
        return True

    def wait_for_final_uploads(self, timeout_s: float | None = None) -> bool:
        """Wait until the final uploads of the uploaders stopped so far are over (None: each
        until its own deadline); True when every one went out in full.

        The stops hand them to the background and return at once; this is for a caller
        that wants to know (a test, a command that reports it). At interpreter exit they
        are waited for anyway."""
        if timeout_s is not None and (
            isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not timeout_s >= 0
        ):
            raise ValueError(f"timeout_s must be a number of seconds >= 0 or None, got {timeout_s!r}")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        handles, self._final = self._final, []
        ok = True
        for h in handles:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if h.wait(left):
                continue
            if h.done:
                self._final_failed += 1
            else:
                self._final.append(h)  # still going: asked again next time
                ok = False
        failed, self._final_failed = self._final_failed, 0
        return ok and not failed

    @property
    def misuse_counts(self) -> dict[str, int]:
        """How often each kind of misuse (start twice, stop when not running) happened."""
        return dict(self._misuse.counts)

    @property
    def uploader_pid(self) -> int | None:
        """The process id of the uploader process, while one runs."""
        return self._proc.pid if self._proc is not None else None

    @property
    def endpoints(self) -> list[str]:
        """The URLs the uploader process serves (a PrometheusExporter's `/metrics`), once an
        uploader started: with `port=0` this is where to find the port it picked."""
        proc = self._proc
        return [] if proc is None else [a for a in proc.addresses if a]

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Compute and upload everything now; True if every exporter took it."""
        proc = self._proc
        return bool(proc is not None and proc.alive and proc.flush(timeout_s))

    # -- the seed's API ---------------------------------------------------------------------
    def start_goodput_uploader(self) -> None:
        """Start uploading whole-job goodput, badput, steps and deviation every interval."""
        self._start(_CUMULATIVE, self._source(_CUMULATIVE))

    def stop_goodput_uploader(self, skip_final_flush: bool | None = None, timeout_s: float | None = None) -> bool:
        """Stop the cumulative uploader after a final upload (unless skipped); bounded by timeout_s."""
        return self._stop(_CUMULATIVE, skip_final_flush, timeout_s)

    def start_rolling_window_goodput_uploader(self, rolling_windows_seconds: Sequence[int]) -> None:
        """Start uploading goodput and badput over each trailing window (seconds) every interval."""
        windows = _check_windows(rolling_windows_seconds, "rolling_windows_seconds")
        self._start(_ROLLING, self._source(_ROLLING, windows))

    def stop_rolling_window_goodput_uploader(
        self, skip_final_flush: bool | None = None, timeout_s: float | None = None
    ) -> bool:
        return self._stop(_ROLLING, skip_final_flush, timeout_s)

    def start_goodput_interval_uploader(self, window_size_seconds: float) -> None:
        """Start uploading goodput and badput over the trailing `window_size_seconds` every interval.

        Its samples are the rolling-window ones for that one window (`rolling/<w>s/...`)."""
        w = _check_seconds(window_size_seconds, "window_size_seconds")
        self._start(_INTERVAL, self._source(_ROLLING, _check_windows([round(w) or 1], "window_size_seconds")))

    def stop_goodput_interval_uploader(
        self, skip_final_flush: bool | None = None, timeout_s: float | None = None
    ) -> bool:
        return self._stop(_INTERVAL, skip_final_flush, timeout_s)

    def start_step_deviation_uploader(self) -> None:
        """Start uploading the step-time deviation on its own (it also rides with the cumulative uploader)."""
        if not self.include_step_deviation:
            log.info("GoodputMonitor(%s): include_step_deviation is False; not starting", self.job_name)
            return
        self._start(_STEP_DEVIATION, self._source(_STEP_DEVIATION))

    def stop_step_deviation_uploader(
        self, skip_final_flush: bool | None = None, timeout_s: float | None = None
    ) -> bool:
        if not self.include_step_deviation:
            return True
        return self._stop(_STEP_DEVIATION, skip_final_flush, timeout_s)

    def close(self, timeout_s: float | None = None) -> None:
        """Stop every running uploader (each with its final upload unless skipped, which
        goes on in the background: `wait_for_final_uploads()`)."""
        for key in _KEYS:
            proc = self._proc
            if proc is not None and proc.has_source(key):
                self._stop(key, None, timeout_s)

    def __enter__(self) -> GoodputMonitor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _say_no_cloud_monitoring(job: str) -> None:
    """Once per process: a monitor without `gcp_options` sends nothing to Cloud Monitoring, where
    ml-goodput-measurement's sends by default. Loud on Google Cloud, where that was likely
    expected (`on_google_cloud()`, or a project variable is set), a log line at INFO elsewhere."""
    if not first_warning(("monitor", "no-cloud-monitoring")):  # `_misuse.reset_warned()` forgets
        return
    on_gcp = on_google_cloud() or any(os.environ.get(v) for v in _env.GCP_PROJECT_VARS)
    log.log(
        logging.WARNING if on_gcp else logging.INFO,
        "GoodputMonitor(%s): no gcp_options, so nothing goes to Cloud Monitoring (ml-goodput-measurement"
        " sends there by default); pass gcp_options=GCPOptions() to send (docs/compatibility.md)",
        job,
    )
