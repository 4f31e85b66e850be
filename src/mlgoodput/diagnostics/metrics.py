"""`metrics.record`: the hot-path call that stores one metric value of the active run.

A call checks its arguments, appends one event to the run's journal and, when the run
has exporters, one tuple to their queue. It never waits for I/O.
"""

from __future__ import annotations

import math
import time as _time
from collections.abc import Sequence

from mlgoodput.diagnostics import _run
from mlgoodput.diagnostics.metric_types import MetricType
from mlgoodput.events import Kind, check_step

__all__ = ["record"]

_METRIC = Kind.METRIC
_NAMES: dict[object, str] = {m: m.value for m in MetricType}
_MAX_CACHED = 4096


def record(metric_type_or_name: MetricType | str, value: object, step: int | None = None) -> None:
    """Record `value` for a predefined `MetricType` or any metric name, at `step` (or on the time axis).

    A list or tuple of numbers is recorded as its mean. Raises TypeError/ValueError for a
    name that is not a non-empty string or a value that is not a number, and RuntimeError
    before `machinelearning_run`.
    """
    run = _run._current
    if run is None:
        raise RuntimeError("metrics.record needs an active run: call machinelearning_run(name=...) first")
    try:
        name = _NAMES.get(metric_type_or_name)
    except TypeError:  # unhashable: certainly not a name
        name = None
    if name is None:
        name = _resolve_name(metric_type_or_name)
    t = type(value)
    v = float(value) if t is float or t is int else _to_number(value)  # type: ignore[arg-type]
    if (step is not None and type(step) is not int) or (step is not None and step < 0):
        step = check_step(step)
    now = _time.time()
    run._append(_METRIC, now, step, v, name)
    put = run._feed_put
    if put is not None:
        put(("metrics", name, v, step, now))


def _resolve_name(m: object) -> str:
    if isinstance(m, MetricType):
        return m.value
    if not isinstance(m, str):
        raise TypeError(
            f"metric_type_or_name must be a metric_types.MetricType or a metric name string, got {m!r}"
        )
    name = m.strip()
    if not name:
        raise ValueError(f"metric_type_or_name must be a non-empty name, got {m!r}")
    if len(_NAMES) < _MAX_CACHED:
        _NAMES[m] = name
    return name


def _to_number(value: object) -> float:
    """A metric value as a float: numbers, numpy/JAX scalars, or the mean of a non-empty list."""
    if isinstance(value, (bool, str, bytes)):
        raise TypeError(f"value must be a number or a list of numbers, got {value!r}")
    if hasattr(type(value), "__float__"):  # numpy/JAX scalars: straight to float, no ABC check
        try:
            return float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            pass  # an array of several values: averaged below
    elif isinstance(value, (list, tuple, Sequence)):  # list and tuple are checked first, cheaply
        if len(value) == 0:
            raise ValueError("value must not be an empty list")
        items = [x if type(x) is float else _to_number(x) for x in value]
        return math.fsum(items) / len(items)
    tolist = getattr(value, "tolist", None)  # a numpy/JAX array of several values
    if callable(tolist):
        flat = tolist()
        if isinstance(flat, list):
            return _to_number(_flatten(flat))
    raise TypeError(f"value must be a number or a list of numbers, got {value!r}")


def _flatten(xs: list[object]) -> list[object]:
    out: list[object] = []
    for x in xs:
        if isinstance(x, list):
            out.extend(_flatten(x))
        else:
            out.append(x)
    return out
