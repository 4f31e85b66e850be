"""`metrics.record` and `record_metrics`: the hot-path calls that store metric values of the active run.

A call appends one event to the run's journal and, when the run has exporters, one tuple to
their queue; it never waits for I/O and never raises for what it is given: a value it
cannot record is reported once per kind (an `MlGoodputWarning` and a log line naming the
argument and the value) and skipped, and the rest is recorded. Strict mode
(`machinelearning_run(strict=True)` or `MLGOODPUT_STRICT=1`) turns those reports into
`RecordingError`s, for tests. Values recorded before any run is active
are kept (up to `PENDING_MAX`) and written into the next run, as the SDK does.
"""

from __future__ import annotations

import collections
import math
import operator
import threading
import time as _time
from collections.abc import Mapping, Sequence
from typing import Any

from mlgoodput._misuse import MlGoodputMisuseError, misuse
from mlgoodput.diagnostics import _run, metric_types
from mlgoodput.diagnostics._errors import RecordingError
from mlgoodput.diagnostics.metric_types import METRIC_UNITS, MetricType
from mlgoodput.events import Kind

__all__ = ["metric_types", "record", "record_metrics"]

_METRIC = Kind.METRIC
_NAMES: dict[object, str] = {m: m.value for m in MetricType}
_MAX_CACHED = 4096
#: How many values recorded before `machinelearning_run` are kept for the next run (the SDK's queue size).
PENDING_MAX = 10_000
_pending: collections.deque[tuple[str, Any, int | None, float, dict[str, str] | None, bool]] = collections.deque(
    maxlen=PENDING_MAX
)
_pending_lock = threading.Lock()
_CALL = "metrics.record"


def record(
    metric_name: MetricType | str,
    value: object,
    step: int | None = None,
    labels: Mapping[str, str] | None = None,
    record_on_all_hosts: bool = False,
) -> None:
    """Record `value` for a predefined `MetricType` or any metric name, at `step` (or on the time axis).

    A list or tuple of numbers (or a numpy/JAX array) is recorded as its mean; a string or
    a dict is kept as a text entry of the run. `labels` are stored with the value and passed
    to exporters. As in the SDK, only process 0 records unless `record_on_all_hosts=True`.
    Never raises for a value, name or step it cannot use (see the module docstring).
    """
    run = _run.current_run()
    try:
        name = _NAMES.get(metric_name)
    except TypeError:  # unhashable: certainly not a name
        name = None
    if name is None:
        name = _resolve_name(metric_name)
        if name is None:
            return
    t = type(value)
    if t is float or t is int:
        try:
            v = float(value)  # type: ignore[arg-type]
        except OverflowError:  # an int no float holds
            _to_number(name, value)  # reports it
            return
    else:
        num = _to_number(name, value)
        if num is None:
            if isinstance(value, (str, Mapping)):
                _record_entry(run, name, value, step, labels, record_on_all_hosts)
            return
        v = num
    if step is not None and (type(step) is not int or step < 0):
        step = _check_step(name, step)
    if labels is not None:
        labels = _check_labels(labels)
    if record_on_all_hosts is not False and not isinstance(record_on_all_hosts, bool):
        record_on_all_hosts = _flag(record_on_all_hosts, "record_on_all_hosts")
    now = _time.time()
    if run is None:
        _hold(name, v, step, now, labels, record_on_all_hosts)
        return
    if run.process_index != 0 and not record_on_all_hosts:
        return  # the SDK's default: one copy of each value, from process 0
    try:
        run.sink.append(_METRIC, now, step, v, name, None if labels is None else {"labels": labels})
    except ValueError as e:  # what the journal cannot hold: a step beyond 64 bits, a huge name
        _unrecordable(name, step, e)
        return
    put = run.feed_put
    if put is not None:
        put(("metrics", name, v, step, now) if labels is None else ("metrics", name, v, step, now, labels))


def record_metrics(
    metrics_data: Sequence[Mapping[str, Any]],
    record_on_all_hosts: bool = False,
    step: int | None = None,
) -> None:
    """Record several values: each item a dict with `metric_name` and `value`, and optionally
    `step` and `labels`; `step` applies to the items without a "step" key. An item that is
    not such a dict is reported and skipped, like a bad value."""
    if isinstance(metrics_data, (str, bytes, Mapping)) or not isinstance(metrics_data, Sequence):
        _report(
            "record_metrics",
            "metrics_data",
            metrics_data,
            "must be a list of dicts; nothing recorded",
            kind="metrics_data",
        )
        return
    for item in metrics_data:
        if not isinstance(item, Mapping) or "metric_name" not in item:
            _report(
                "record_metrics",
                "metrics_data",
                item,
                "each item must be a dict with 'metric_name' and 'value'; item skipped",
                kind="item",
            )
            continue
        s = item.get("step", step)  # as in the SDK: only a missing step is filled in
        record(
            item["metric_name"],
            item.get("value"),
            s,
            labels=item.get("labels"),
            record_on_all_hosts=record_on_all_hosts,
        )


# -- what cannot be recorded as given -----------------------------------------------------


def _report(call: str, argument: str, value: object, message: str, *, kind: str) -> None:
    """Warn once per kind (never raising), or raise RecordingError in strict mode."""
    run = _run.current_run()
    try:
        misuse(call, argument, value, message, kind=kind, strict=None if run is None else run.strict)
    except MlGoodputMisuseError as e:
        raise RecordingError(str(e)) from None


def _resolve_name(m: object) -> str | None:
    if isinstance(m, MetricType):
        return m.value
    if not isinstance(m, str):
        _report(
            _CALL,
            "metric_name",
            m,
            "must be a metric_types.MetricType or a metric name string; value skipped",
            kind="metric_name",
        )
        return None
    name = m.strip()
    if not name:
        _report(_CALL, "metric_name", m, "must be a non-empty name; value skipped", kind="metric_name")
        return None
    if len(_NAMES) < _MAX_CACHED:
        _NAMES[m] = name
    return name


def _check_step(name: str, step: object) -> int | None:
    """A step as a non-negative int; anything else is reported and the value goes on the time axis."""
    if not isinstance(step, bool):
        try:
            n = operator.index(step)  # type: ignore[arg-type]
            if n >= 0:
                return int(n)
        except TypeError:
            pass
    _report(
        _CALL,
        "step",
        step,
        f"must be a non-negative integer; the {name!r} value is recorded without a step",
        kind="step",
    )
    return None


def _flag(value: object, arg: str) -> bool:
    """A flag as Python reads it; one with no single truth value (a numpy array of several) is
    misuse, read as False."""
    try:
        return bool(value)
    except Exception:
        _report(_CALL, arg, value, "has no single truth value; read as False", kind=arg)
        return False


def _check_labels(labels: object) -> dict[str, str] | None:
    if isinstance(labels, Mapping):
        try:
            return {str(k): str(v) for k, v in labels.items()}
        except Exception:  # a key or value whose str() raises: misuse, never raised into training
            pass
    _report(_CALL, "labels", labels, "must be a dict of strings; the value is recorded without labels", kind="labels")
    return None


def _to_number(name: str, value: object) -> float | None:
    """A metric value as a float: numbers (bools as 0/1, as in the SDK), numpy/JAX scalars, or the
    mean of a non-empty list or array. None when it is none of those (reported unless text)."""
    if isinstance(value, bool):
        return float(value)
    if value is None:
        _report(_CALL, "value", value, f"no value for {name!r}; nothing recorded", kind="value_none")
        return None
    if isinstance(value, (str, Mapping)):
        return None  # kept as a text entry by the caller
    if hasattr(type(value), "__float__"):  # numpy/JAX scalars: straight to float, no ABC check
        try:
            return float(value)  # type: ignore[arg-type]
        except OverflowError:
            _report(_CALL, "value", value, f"too large for a float; the {name!r} value is skipped", kind="value_type")
            return None
        except (TypeError, ValueError):
            pass  # an array of several values: averaged below
    if isinstance(value, (list, tuple, Sequence)) and not isinstance(value, (bytes, bytearray)):
        return _mean(name, list(value), value)
    tolist = getattr(value, "tolist", None)  # a numpy/JAX array of several values
    if callable(tolist):
        try:
            flat = tolist()
        except Exception:
            flat = None
        if isinstance(flat, list):
            return _mean(name, _flatten(flat), value)
    _report(
        _CALL,
        "value",
        value,
        f"must be a number or a list of numbers; the {name!r} value is skipped",
        kind="value_type",
    )
    return None


def _mean(name: str, items: list[object], original: object) -> float | None:
    if not items:
        _report(
            _CALL, "value", original, f"an empty list has no mean; the {name!r} value is skipped", kind="value_empty"
        )
        return None
    out: list[float] = []
    for x in items:
        if type(x) is float:
            out.append(x)
            continue
        try:
            if isinstance(x, (str, bytes)) or x is None:
                raise TypeError
            out.append(float(x))  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            _report(
                _CALL,
                "value",
                original,
                f"a list must hold numbers only; the {name!r} value is skipped",
                kind="value_type",
            )
            return None
    return math.fsum(out) / len(out)


def _flatten(xs: list[object]) -> list[object]:
    out: list[object] = []
    for x in xs:
        if isinstance(x, list):
            out.extend(_flatten(x))
        else:
            out.append(x)
    return out


def _record_entry(
    run: _run.MLRun | None, name: str, body: object, step: object, labels: object, all_hosts: bool
) -> None:
    """A string or dict value: stored as a text entry of the run (the SDK writes it as a log entry)."""
    if run is None:
        _hold(
            name,
            body,
            None if not isinstance(step, int) else step,
            _time.time(),
            _check_labels(labels) if labels is not None else None,
            bool(all_hosts),
        )
        return
    if run.process_index != 0 and not all_hosts:
        return
    from mlgoodput.diagnostics._configs import to_json

    try:
        payload = to_json(body, "value")
    except TypeError:
        payload = str(body)
    lab = _check_labels(labels) if labels is not None else None
    st = step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None
    attrs = {
        "logger": "mlgoodput.metrics",
        "level": "INFO",
        "namespace": name,
        "body": payload,
        "step": st,
        "labels": lab or {},
        "unit": METRIC_UNITS.get(name, "1"),
    }
    try:
        run.sink.append(Kind.LOG, _time.time(), st, None, name, attrs)
    except ValueError as e:
        _unrecordable(name, st, e)


def _unrecordable(name: str, step: object, error: Exception) -> None:
    """A value the run's journal refused (a step beyond 64 bits, a name too long): reported, skipped."""
    _report(
        _CALL,
        "metric_name",
        name,
        f"cannot be journaled at step={step!r} ({error}); value skipped",
        kind="unrecordable",
    )


# -- before the first run -----------------------------------------------------------------


def _hold(name: str, value: Any, step: int | None, now: float, labels: dict[str, str] | None, all_hosts: bool) -> None:
    _report(
        _CALL,
        "metric_name",
        name,
        "no active run: call machinelearning_run(name=...) first; values are kept (up to "
        f"{PENDING_MAX}) and written into the next run started in this process",
        kind="no_run",
    )
    with _pending_lock:
        full = len(_pending) == PENDING_MAX
        _pending.append((name, value, step, now, labels, all_hosts))
    if full:
        _report(
            _CALL,
            "metric_name",
            name,
            f"more than {PENDING_MAX} values recorded before any run; the oldest are dropped",
            kind="pending_full",
        )


def write_pending(run: _run.MLRun) -> int:
    """Write the values held since before any run into `run`, with their own times; returns how
    many (`machinelearning_run` calls it once the run is current)."""
    with _pending_lock:
        items = list(_pending)
        _pending.clear()
    n = 0
    for name, value, step, t, labels, all_hosts in items:
        if run.process_index != 0 and not all_hosts:
            continue
        if isinstance(value, float):
            try:
                run.sink.append(_METRIC, t, step, value, name, None if labels is None else {"labels": labels})
            except ValueError as e:
                _unrecordable(name, step, e)
                continue
            if run.feed_put is not None:
                run.feed_put(
                    ("metrics", name, value, step, t) if labels is None else ("metrics", name, value, step, t, labels)
                )
        else:
            _record_entry(run, name, value, step, labels, True)
        n += 1
    return n
