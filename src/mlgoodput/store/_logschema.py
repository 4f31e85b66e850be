"""Events as Cloud Logging JSON payloads, in ml-goodput-measurement 0.2.3's own schema.

ml-goodput-measurement writes one structured entry per recorder call: `job_name` plus one
key that names the call and holds the time as UNIX seconds (`step_start_time` with
`step_count`, `custom_badput_event_start_time` with `custom_badput_event_type`, the
elastic keys, ...). Orbax's Cloud Logging logger writes one entry per checkpoint save or
restore (`event_type` "save" / "restore" / "emergency_restore" with its step statistics)
into the same log. `to_event` reads all of those; `to_payload` writes an event in that
schema whenever the schema can hold it, so ml-goodput-measurement reads what we write.

What that schema cannot say (step ends, compiles, our checkpoint start/end pairs, runs,
metrics, a host other than 0) goes into entries of our own: `mlgoodput_kind` and
`mlgoodput_time` plus optional `mlgoodput_step`, `mlgoodput_value`, `mlgoodput_name`,
`mlgoodput_attrs` (JSON text, so types survive) and `mlgoodput_host`. ml-goodput-measurement
ignores keys it does not know, so those entries are invisible to it. Pure: no I/O here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from mlgoodput.events import Event, Kind

JOB_NAME = "job_name"
EXT_KIND = "mlgoodput_kind"
EXT_TIME = "mlgoodput_time"
EXT_STEP = "mlgoodput_step"
EXT_VALUE = "mlgoodput_value"
EXT_NAME = "mlgoodput_name"
EXT_ATTRS = "mlgoodput_attrs"
EXT_HOST = "mlgoodput_host"

# Kinds whose seed entry is `job_name` plus one time key.
_PLAIN: dict[Kind, str] = {
    Kind.JOB_START: "job_start_time",
    Kind.JOB_END: "job_end_time",
    Kind.ACCEL_INIT_START: "tpu_init_start_time",
    Kind.ACCEL_INIT_END: "tpu_init_end_time",
    Kind.TRAINING_PREP_START: "training_prep_start_time",
    Kind.TRAINING_PREP_END: "training_prep_end_time",
    Kind.DATA_LOADING_START: "data_loading_start_time",
    Kind.DATA_LOADING_END: "data_loading_end_time",
    Kind.ELASTIC_REINIT_START: "elastic_reinit_start_time",
    Kind.ELASTIC_REINIT_END: "elastic_reinit_end_time",
}
_PLAIN_BY_KEY = {v: k for k, v in _PLAIN.items()}
_STEP_COUNT, _STEP_START_TIME = "step_count", "step_start_time"
_CUSTOM_TYPE = "custom_badput_event_type"
_CUSTOM = {Kind.CUSTOM_START: "custom_badput_event_start_time", Kind.CUSTOM_END: "custom_badput_event_end_time"}
_WAIT_TYPE = "elastic_wait_event_type"
_WAIT = {Kind.ELASTIC_WAIT_START: "elastic_wait_start_time", Kind.ELASTIC_WAIT_END: "elastic_wait_end_time"}
_SLICES = ("active_slices", "total_slices", "available_slices")
_SLICE_ATTRS = ("active", "total", "available")
_SLICE_TIME = "elastic_slice_counts_timestamp"
_KIND_BY_NAME = {k.name.lower(): k for k in Kind}


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _int(v: Any) -> int | None:
    f = _num(v)
    if f is None or f != int(f):
        return None
    return int(f)


def _host(p: Mapping[str, Any]) -> int:
    h = _int(p.get(EXT_HOST))
    return h if h is not None and h >= 0 else 0


def _finite(v: float | None) -> bool:
    return v is not None and math.isfinite(v)


def _seed_payload(e: Event) -> dict[str, Any] | None:
    """The seed-schema fields for `e`, or None when that schema cannot hold it exactly."""
    bare = e.step is None and e.value is None and e.name is None and not e.attrs
    if e.kind in _PLAIN and bare:
        return {_PLAIN[e.kind]: e.time}
    if e.kind is Kind.STEP_START and e.step is not None and e.value is None and e.name is None and not e.attrs:
        return {_STEP_COUNT: e.step, _STEP_START_TIME: e.time}
    if e.kind in _CUSTOM and e.name is not None and e.step is None and e.value is None and not e.attrs:
        return {_CUSTOM_TYPE: e.name, _CUSTOM[e.kind]: e.time}
    if e.kind in _WAIT and e.name is not None and e.step is None and e.value is None and not e.attrs:
        return {_WAIT_TYPE: e.name, _WAIT[e.kind]: e.time}
    if (
        e.kind is Kind.SLICE_COUNTS
        and e.attrs
        and set(e.attrs) == set(_SLICE_ATTRS)
        and e.step is None
        and e.value is None
        and e.name is None
    ):
        counts = [e.attrs[a] for a in _SLICE_ATTRS]
        if all(isinstance(c, int) and not isinstance(c, bool) for c in counts):
            return {**dict(zip(_SLICES, counts, strict=True)), _SLICE_TIME: e.time}
    if (
        e.kind in (Kind.CKPT_SAVE, Kind.CKPT_RESTORE)
        and e.step is not None
        and _finite(e.value)
        and e.name is None
        and not e.attrs
    ):
        secs = float(e.value)  # type: ignore[arg-type]
        if e.kind is Kind.CKPT_SAVE:  # Orbax's SaveStepStatistics fields, as its CloudLogger writes them
            return {
                "checkpoint_manager_blocking_start_time": e.time,
                "event_type": "save",
                "step": e.step,
                "directory": "",
                "synchronous": True,
                "reached_preemption": False,
                "checkpoint_manager_blocking_duration_secs": secs,
                "checkpointer_blocking_start_time": e.time,
                "checkpointer_blocking_duration_secs": secs,
                "wait_for_prev_duration_secs": 0.0,
                "get_old_steps_duration_secs": 0.0,
            }
        return {  # RestoreStepStatistics
            "checkpoint_manager_start_time": e.time,
            "event_type": "restore",
            "step": e.step,
            "directory": "",
            "checkpoint_manager_duration_secs": secs,
            "checkpointer_start_time": e.time,
            "checkpointer_duration_secs": secs,
        }
    return None


def to_payload(job: str, e: Event) -> dict[str, Any]:
    """The JSON payload of one entry for event `e` of `job` (see the module docstring)."""
    p: dict[str, Any] = {JOB_NAME: job}
    seed = _seed_payload(e)
    if seed is not None:
        p.update(seed)
    else:
        p[EXT_KIND] = e.kind.name.lower()
        p[EXT_TIME] = e.time
        if e.step is not None:
            p[EXT_STEP] = e.step
        if e.value is not None:
            p[EXT_VALUE] = e.value if math.isfinite(e.value) else str(e.value)
        if e.name is not None:
            p[EXT_NAME] = e.name
        if e.attrs:
            p[EXT_ATTRS] = json.dumps(dict(e.attrs), separators=(",", ":"), sort_keys=True, default=str)
    if e.host:
        p[EXT_HOST] = e.host
    return p


def _orbax(p: Mapping[str, Any]) -> Event | None:
    etype = p.get("event_type")
    if etype == "save":
        kind = Kind.CKPT_SAVE
        pairs = (
            ("checkpoint_manager_blocking_start_time", "checkpoint_manager_blocking_duration_secs"),
            ("checkpointer_blocking_start_time", "checkpointer_blocking_duration_secs"),
        )
    elif etype in ("restore", "emergency_restore"):
        kind = Kind.CKPT_RESTORE
        pairs = (
            ("checkpoint_manager_start_time", "checkpoint_manager_duration_secs"),
            ("checkpointer_start_time", "checkpointer_duration_secs"),
        )
    else:
        return None
    for start_key, dur_key in pairs:  # the checkpoint manager's view first, as the seed counts it
        start, dur = _num(p.get(start_key)), _num(p.get(dur_key))
        if start is not None and dur is not None:
            return Event(kind, start, _host(p), step=_int(p.get("step")), value=max(0.0, dur))
    return None


def _extension(p: Mapping[str, Any]) -> Event | None:
    kind = _KIND_BY_NAME.get(str(p.get(EXT_KIND)))
    t = _num(p.get(EXT_TIME))
    if kind is None or t is None:
        return None
    raw_v = p.get(EXT_VALUE)
    value = float(raw_v) if isinstance(raw_v, str) and raw_v in ("inf", "-inf", "nan") else _num(raw_v)
    name = p.get(EXT_NAME)
    attrs: dict[str, Any] | None = None
    if isinstance(p.get(EXT_ATTRS), str):
        try:
            loaded = json.loads(p[EXT_ATTRS])
        except ValueError:
            return None
        attrs = loaded if isinstance(loaded, dict) and loaded else None
    return Event(
        kind,
        t,
        _host(p),
        step=_int(p.get(EXT_STEP)),
        value=value,
        name=name if isinstance(name, str) else None,
        attrs=attrs,
    )


def to_event(p: Mapping[str, Any]) -> Event | None:
    """The event an entry's JSON payload stands for; None when it is not a goodput entry."""
    if EXT_KIND in p:
        return _extension(p)
    h = _host(p)
    if _STEP_START_TIME in p:
        t, step = _num(p.get(_STEP_START_TIME)), _int(p.get(_STEP_COUNT))
        return None if t is None or step is None or step < 0 else Event(Kind.STEP_START, t, h, step=step)
    for key, kind in _PLAIN_BY_KEY.items():
        if key in p:
            t = _num(p[key])
            return None if t is None else Event(kind, t, h)
    for kind, key in (*_CUSTOM.items(), *_WAIT.items()):
        if key in p:
            t = _num(p[key])
            type_key = _CUSTOM_TYPE if kind in _CUSTOM else _WAIT_TYPE
            name = p.get(type_key, "unknown")
            return None if t is None or not isinstance(name, str) else Event(kind, t, h, name=name)
    if _SLICE_TIME in p:
        t = _num(p[_SLICE_TIME])
        counts = [_int(p.get(k)) for k in _SLICES]
        if t is None or any(c is None for c in counts):
            return None
        return Event(Kind.SLICE_COUNTS, t, h, attrs=dict(zip(_SLICE_ATTRS, counts, strict=True)))
    if "event_type" in p:
        return _orbax(p)
    return None
