"""Registering our callables with `jax.monitoring`, and the compile listener.

`install` adds one listener per callback kind the installed JAX offers (events, durations,
scalars and, where present, time spans) and `uninstall` removes exactly those. The compile
listener turns each measured compile phase into a `Kind.COMPILE` event of the job, so the
calculator counts recompilation inside any step as program startup.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from mlgoodput._once import Once
from mlgoodput.events import Kind

log = logging.getLogger("mlgoodput.jax")

#: The phases of one compile, as JAX names them; they run one after the other.
COMPILE_EVENTS: frozenset[str] = frozenset(
    {
        "/jax/core/compile/jaxpr_trace_duration",
        "/jax/core/compile/jaxpr_to_mlir_module_duration",
        "/jax/core/compile/backend_compile_duration",
    }
)

# (register function name, unregister function name) per callback kind
_API: dict[str, tuple[str, str]] = {
    "event": ("register_event_listener", "unregister_event_listener"),
    "duration": ("register_event_duration_secs_listener", "unregister_event_duration_listener"),
    "scalar": ("register_scalar_listener", "unregister_scalar_listener"),
    "span": ("register_event_time_span_listener", "unregister_event_time_span_listener"),
}


class EventSink(Protocol):
    """What compile events are written to: a journal (`mlgoodput._journal.Journal`)."""

    def append(
        self,
        kind: Kind,
        time: float,
        step: int | None = None,
        value: float | None = None,
        name: str | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> None: ...


def monitoring_module() -> Any:
    """`jax.monitoring`, or an ImportError that names the extra to install."""
    try:
        import jax.monitoring as m
    except ImportError as e:  # pragma: no cover - jax is installed in our test environment
        raise ImportError("mlgoodput.jax needs JAX: pip install 'mlgoodput[jax]'") from e
    return m


def supported_kinds() -> list[str]:
    """The callback kinds the installed JAX can register (time spans arrived in 2025)."""
    m = monitoring_module()
    return [k for k, (reg, unreg) in _API.items() if hasattr(m, reg) and hasattr(m, unreg)]


def install(callbacks: dict[str, Callable[..., None]]) -> list[tuple[str, Callable[..., None]]]:
    """Register each callable under its kind where JAX supports it; returns what was added."""
    m = monitoring_module()
    added = []
    for kind, fn in callbacks.items():
        reg = _API[kind][0]
        if not hasattr(m, reg):
            continue
        getattr(m, reg)(fn)
        added.append((kind, fn))
    return added


def uninstall(added: list[tuple[str, Callable[..., None]]]) -> None:
    """Remove what `install` added; a listener someone else already removed is skipped."""
    m = monitoring_module()
    for kind, fn in added:
        try:
            getattr(m, _API[kind][1])(fn)
        except (AssertionError, ValueError):
            pass  # cleared by jax.monitoring.clear_event_listeners() or the like


def compile_listeners(
    sink: EventSink, clock: Callable[[], float] = time.time, *, spans: bool | None = None
) -> dict[str, Callable[..., None]]:
    """Listeners that write each compile phase as `Kind.COMPILE` (time = start, value =
    seconds, name = the function). With time spans available the start is exact; older JAX
    gives durations only, and the start is then `now - duration` (the listener runs right
    after the phase). `spans=None` picks what the installed JAX offers. Never raises into
    JAX: a failure is counted and logged once."""
    failures = Once()  # counted; the first one logged

    def _fail(e: Exception) -> None:
        failures.warning(log, "compile", "mlgoodput.jax: could not record a compile event: %s", e)

    def on_span(event: str, start_time: float, end_time: float, **kw: Any) -> None:
        if event not in COMPILE_EVENTS:
            return
        try:
            name = kw.get("fun_name")
            sink.append(
                Kind.COMPILE,
                float(start_time),
                value=max(0.0, end_time - start_time),
                name=str(name) if name is not None else event.rsplit("/", 1)[-1],
            )
        except Exception as e:
            _fail(e)

    def on_duration(event: str, duration_secs: float, **kw: Any) -> None:
        if event not in COMPILE_EVENTS:
            return
        try:
            d = max(0.0, float(duration_secs))
            name = kw.get("fun_name")
            sink.append(
                Kind.COMPILE, clock() - d, value=d, name=str(name) if name is not None else event.rsplit("/", 1)[-1]
            )
        except Exception as e:
            _fail(e)

    if spans is None:
        spans = "span" in supported_kinds()
    return {"span": on_span} if spans else {"duration": on_duration}
