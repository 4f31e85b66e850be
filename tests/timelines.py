"""Load goodput-timeline/v1 files (tests/data/timelines) into events and their known truth."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from mlgoodput.accounting import BadputType, GoodputReport
from mlgoodput.events import Event, Kind

DATA = Path(__file__).parent / "data" / "timelines"
ORIGIN = 1_700_000_000.0

_SIMPLE = {
    "job_start": Kind.JOB_START,
    "job_end": Kind.JOB_END,
    "accel_init_start": Kind.ACCEL_INIT_START,
    "accel_init_end": Kind.ACCEL_INIT_END,
    "training_prep_start": Kind.TRAINING_PREP_START,
    "training_prep_end": Kind.TRAINING_PREP_END,
    "data_loading_start": Kind.DATA_LOADING_START,
    "data_loading_end": Kind.DATA_LOADING_END,
    "elastic_reinit_start": Kind.ELASTIC_REINIT_START,
    "elastic_reinit_end": Kind.ELASTIC_REINIT_END,
}

TRUTH_KEYS = {
    "accel_init": BadputType.TPU_INITIALIZATION,
    "training_prep": BadputType.TRAINING_PREP,
    "data_loading_sync": BadputType.DATA_LOADING_SYNC,
    "program_startup": BadputType.PROGRAM_STARTUP,
    "ckpt_save": BadputType.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME,
    "ckpt_restore": BadputType.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME,
    "wasted_progress": BadputType.WASTED_PROGRESS_FROM_DISRUPTION,
    "infra_recovery": BadputType.INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION,
    "elastic_slice_down": BadputType.ELASTIC_SLICE_DOWN,
    "elastic_scale_up": BadputType.ELASTIC_SCALE_UP,
    "elastic_reinit": BadputType.ELASTIC_REINITIALIZATION,
    "stall": BadputType.STALL,
    "idle_other": BadputType.OTHER,
}


@dataclass
class Timeline:
    name: str
    job_name: str
    header: dict[str, Any]
    events: list[Event]

    @property
    def truth(self) -> dict[str, Any]:
        return dict(self.header["truth"])

    @property
    def query(self) -> float:
        return ORIGIN + float(self.header["queries"][-1])


def to_event(d: dict[str, Any]) -> Event:
    t = ORIGIN + float(d["t"])
    host = int(d.get("host", 0))
    ev = d["ev"]
    if ev in _SIMPLE:
        return Event(_SIMPLE[ev], t, host)
    if ev == "step_start":
        return Event(Kind.STEP_START, t, host, step=int(d["step"]))
    if ev == "step_end":
        return Event(Kind.STEP_END, t, host, step=int(d["step"]))
    if ev in ("custom_start", "custom_end"):
        k = Kind.CUSTOM_START if ev == "custom_start" else Kind.CUSTOM_END
        return Event(k, t, host, name=str(d["name"]))
    if ev == "ckpt_save":
        return Event(Kind.CKPT_SAVE, t, host, step=int(d["step"]), value=float(d["blocking_s"]))
    if ev == "ckpt_restore":
        return Event(Kind.CKPT_RESTORE, t, host, step=int(d["step"]), value=float(d["duration_s"]))
    if ev in ("elastic_wait_start", "elastic_wait_end"):
        k = Kind.ELASTIC_WAIT_START if ev == "elastic_wait_start" else Kind.ELASTIC_WAIT_END
        return Event(k, t, host, name=str(d["kind"]))
    if ev == "slice_counts":
        attrs = {"active": d["active"], "total": d["total"], "available": d["available"]}
        return Event(Kind.SLICE_COUNTS, t, host, attrs=attrs)
    if ev == "compile":
        return Event(Kind.COMPILE, t, host, value=float(d["duration_s"]), name=d.get("name"))
    if ev == "step_flops":
        return Event(Kind.STEP_FLOPS, t, host, value=float(d["flops"]))
    if ev == "peak_flops":
        return Event(Kind.PEAK_FLOPS, t, host, value=float(d["flops_per_s"]), name=d.get("source"))
    if ev == "job_submit":  # recorded at t; the submit time itself is submit_t from the origin
        return Event(Kind.JOB_SUBMIT, t, host, value=ORIGIN + float(d["submit_t"]), name=d.get("source"))
    raise ValueError(f"unknown timeline event {ev!r}")


def load(path: Path) -> Timeline:
    lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    header, rows = lines[0], lines[1:]
    rows = sorted(rows, key=lambda r: float(r["t"]))  # stable
    return Timeline(header["name"], header["job_name"], header, [to_event(r) for r in rows])


def all_timelines() -> list[Path]:
    return sorted(DATA.glob("*.jsonl"))


def assert_matches_truth(r: GoodputReport, truth: dict[str, Any], tol: float) -> None:
    """A report agrees with a timeline's truth: totals and buckets within `tol` (restart buckets
    within one ideal step per crash more: the spec estimates how far a crashed step got)."""
    crash_tol = tol + r.ideal_step_time_s * truth["disruptions"]
    assert r.total_s == pytest.approx(truth["total_s"], abs=tol)
    assert r.productive_s == pytest.approx(truth["productive_s"], abs=tol)
    for key, bucket in TRUTH_KEYS.items():
        t = crash_tol if key in ("wasted_progress", "infra_recovery") else tol
        assert r.badput_total_s(bucket) == pytest.approx(truth["badput_s"][key], abs=t), key
    custom = r.badput_s[BadputType.CUSTOM_BADPUT_EVENTS]
    assert set(custom) == set(truth["badput_s"]["custom"])
    for name, secs in truth["badput_s"]["custom"].items():
        assert custom[name] == pytest.approx(secs, abs=tol)
    assert r.overlapped_s[BadputType.DATA_LOADING_ASYNC] == pytest.approx(
        truth["overlapped_s"].get("data_loading_async", 0.0), abs=tol
    )
    assert r.disruptions == truth["disruptions"]
    assert r.last_step == truth["last_step"]
    assert r.max_productive_step == truth["max_productive_step"]
