"""torch.compile time as program startup, and compile metrics exported like JAX's.

PyTorch 2.13 has no public compile hook (`torch.compiler` offers none), so this uses Dynamo's
compile start/end callbacks (`torch._dynamo.callback.callback_handler`), registered and
removed through its own register/remove methods (no patching); tests/torch pin the version
and check the hook. Each compile (a new frame, a recompile after a guard failure, a lazily
compiled backward) becomes:

- a `Kind.COMPILE` event of the goodput job (time = start, value = seconds), so a compile
  inside any step counts as PROGRAM_STARTUP, measured rather than inferred;
- a duration of `/torch/compile/duration` (label `trigger`) and a count of
  `/torch/compile/recompiles` in the same aggregator, shipper and exporter process as
  `mlgoodput.jax` (samples `torch/compile/duration/count`, `.../sum`, ...), and as
  aggregates in the store's `mlgoodput.torch` stream.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mlgoodput.events import Kind, check_name

log = logging.getLogger("mlgoodput.torch")

#: Reserved store namespace of the torch compile aggregates.
NAMESPACE = "mlgoodput.torch"
DURATION = "/torch/compile/duration"
RECOMPILES = "/torch/compile/recompiles"
COMPILES = "/torch/compile/compiles"

__all__ = ["NAMESPACE", "CompileSession", "CompileStats", "compile_stats", "current", "init", "shutdown"]


@dataclass(frozen=True, slots=True)
class CompileStats:
    """What this process compiled since `init`: forward frames (first compiles and
    recompiles), backward graphs compiled lazily, and the seconds all of them took."""

    compiles: int
    recompiles: int
    backward_compiles: int
    total_s: float


def _dynamo_handler() -> Any:
    try:
        from torch._dynamo.callback import callback_handler
    except ImportError as e:
        raise ImportError(
            "mlgoodput.torch compile tracking needs PyTorch 2.x with Dynamo: pip install 'mlgoodput[torch]'"
        ) from e
    return callback_handler


def _is_recompile(compile_id: str) -> bool:
    """Dynamo's compile id is `<frame id>/<compile of that frame>`: 0 is the first compile."""
    try:
        return int(str(compile_id).split("/")[1].split("_")[0]) > 0
    except (IndexError, ValueError):
        return False


class CompileListener:
    """The two Dynamo callbacks and their counters; writes to a journal and an aggregator."""

    def __init__(self, sink: Any, aggregator: Any, clock: Callable[[], float] = time.time) -> None:
        self.sink = sink  # the goodput journal, or None
        self.aggregator = aggregator
        self.clock = clock
        self._open: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()
        self.compiles = self.recompiles = self.backward_compiles = 0
        self.total_s = 0.0
        self.errors = 0

    def on_start(self, args: Any) -> None:
        try:
            key = (str(args.callback_trigger.name), str(args.compile_id))
            with self._lock:
                self._open[key] = self.clock()
        except Exception as e:  # never into the compiler
            self._fail(e)

    def on_end(self, args: Any) -> None:
        try:
            trigger = str(args.callback_trigger.name)
            cid = str(args.compile_id)
            t1 = self.clock()
            with self._lock:
                t0 = self._open.pop((trigger, cid), None)
                if t0 is None:
                    return
                d = max(0.0, t1 - t0)
                self.total_s += d
                recompile = trigger == "DYNAMO" and _is_recompile(cid)
                if trigger == "DYNAMO":
                    self.compiles += 1
                    self.recompiles += recompile
                elif trigger == "LAZY_BACKWARD":
                    self.backward_compiles += 1
            if self.sink is not None:
                self.sink.append(Kind.COMPILE, t0, value=d, name=f"torch.compile {trigger.lower()} {cid}")
            agg = self.aggregator
            agg.on_duration(DURATION, d, trigger=trigger.lower())
            agg.on_event(COMPILES, trigger=trigger.lower())
            if recompile:
                agg.on_event(RECOMPILES)
        except Exception as e:
            self._fail(e)

    def _fail(self, e: Exception) -> None:
        self.errors += 1
        if self.errors == 1:
            log.warning("mlgoodput.torch: could not record a compile: %s", e)

    def stats(self) -> CompileStats:
        with self._lock:
            return CompileStats(self.compiles, self.recompiles, self.backward_compiles, self.total_s)


class CompileSession:
    """What `init` built; `shutdown` undoes it."""

    def __init__(self, job_name: str, listener: CompileListener, shipper: Any, sink: Any, handler: Any) -> None:
        self.job_name = job_name
        self.listener = listener
        self.shipper = shipper
        self.sink = sink  # the exporter process (None without exporters)
        self.handler = handler

    @property
    def compile_sink(self) -> Any:
        return self.listener.sink

    def stats(self) -> CompileStats:
        return self.listener.stats()

    def flush(self, timeout_s: float | None = 10.0) -> bool:
        """Ship the aggregates now and have the exporters send them."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        ok = bool(self.shipper.flush(timeout_s))
        if self.sink is not None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ok = bool(self.sink.flush(left)) and ok
        return ok


_lock = threading.RLock()
_session: CompileSession | None = None
_atexit = False


def current() -> CompileSession | None:
    return _session


def _recorder_sink(recorder: Any) -> Any:
    inner = getattr(recorder, "recorder", recorder)  # a TorchRecorder wraps a GoodputRecorder
    if not hasattr(inner, "record_step_start_time") or not hasattr(inner, "journal"):
        raise TypeError(f"recorder must be a GoodputRecorder or TorchRecorder, got {recorder!r}")
    return inner.journal


def init(
    job_name: str = "torch_job",
    *,
    recorder: Any = None,
    store: Any = None,
    exporters: Sequence[Any] | None = None,
    interval_s: float = 10.0,
    histograms: bool = True,
) -> CompileSession:
    """Measure every torch.compile of this process (safe to call twice).

    `recorder` (GoodputRecorder or TorchRecorder): its job receives each compile as program
    startup; None looks for a recorder of `job_name` in this process. `exporters` (see
    `mlgoodput.export`) get the compile aggregates from a background process every
    `interval_s`; the store (default: the recorder's) gets them in its `mlgoodput.torch` stream.
    """
    global _session, _atexit
    check_name(job_name, "job_name")
    if exporters is not None and (isinstance(exporters, (str, bytes)) or not isinstance(exporters, Sequence)):
        raise TypeError(f"exporters must be a list of exporters or None, got {exporters!r}")
    if isinstance(interval_s, bool) or not isinstance(interval_s, (int, float)) or not interval_s > 0:
        raise ValueError(f"interval_s must be a positive number of seconds, got {interval_s!r}")
    handler = _dynamo_handler()
    with _lock:
        if _session is not None:
            if _session.job_name != job_name:
                log.warning(
                    "mlgoodput.torch.init: already running for job %r; ignoring %r", _session.job_name, job_name
                )
            return _session
        from mlgoodput import _metric_pipeline as _wiring
        from mlgoodput._journal import Journal
        from mlgoodput._metric_pipeline import Aggregator, Shipper

        sink_j = _recorder_sink(recorder) if recorder is not None else _wiring.find_goodput_journal(job_name)
        if store is None and recorder is not None:  # the aggregates go beside the job's events
            store = getattr(getattr(recorder, "recorder", recorder), "store_url", None)
        host = _wiring.default_host(sink_j)
        agg = Aggregator()
        proc = _wiring.make_sink(list(exporters or []), interval_s=float(interval_s))
        metrics = Journal.for_stream(store, NAMESPACE, job_name, host)
        shipper = Shipper(
            agg,
            {"job_name": job_name},
            proc,
            metrics,
            lambda: host,
            interval_s=float(interval_s),
            histograms=bool(histograms),
        )
        shipper.start()
        listener = CompileListener(sink_j, agg)
        handler.register_start_callback(listener.on_start)
        handler.register_end_callback(listener.on_end)
        _session = CompileSession(job_name, listener, shipper, proc, handler)
        if not _atexit:
            atexit.register(_shutdown_at_exit)
            _atexit = True
        return _session


def _shutdown_at_exit() -> None:
    from mlgoodput._worker import exit_time_left

    shutdown(exit_time_left())


def shutdown(timeout_s: float | None = 10.0) -> bool:
    """Remove the callbacks, ship the last aggregates and stop; safe to call twice."""
    global _session
    with _lock:
        s, _session = _session, None
    if s is None:
        return True
    for remove, fn in (
        (s.handler.remove_start_callback, s.listener.on_start),
        (s.handler.remove_end_callback, s.listener.on_end),
    ):
        try:
            remove(fn)
        except ValueError:
            pass  # cleared by torch._dynamo.callback.callback_handler.clear()
    deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def left() -> float | None:
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    ok = bool(s.shipper.close(left()))
    if s.sink is not None:
        try:
            s.sink.shutdown(left())
        except Exception as e:
            log.warning("mlgoodput.torch: exporter shutdown failed: %s", e)
            ok = False
    if s.listener.sink is not None:
        try:
            ok = bool(s.listener.sink.flush(left())) and ok
        except Exception:
            ok = False
    return ok


def compile_stats() -> CompileStats | None:
    """Counts and seconds of this process's compiles since `init` (None before it)."""
    s = _session
    return None if s is None else s.stats()
