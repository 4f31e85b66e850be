"""Property: the public scenarios (../shared/scenarios, copied to tests/data/timelines) fed
through the public recorder API in any order, with any calls repeated, never raise and
give the spec's numbers (spec/accounting.md: the result depends only on the set of events)."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import warnings
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mlgoodput
from mlgoodput import goodput
from timelines import DATA, ORIGIN, assert_matches_truth

PUBLIC = ["s1_clean_run", "s2_custom_and_async_data", "s3_checkpoint_save_restore", "s4_disruption_restart"]
TOL = 0.05
_ids = itertools.count()

Call = Callable[[goodput.Recorder], None]


def _when(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(ORIGIN + t, dt.UTC)


def _calls(row: dict[str, Any]) -> list[Call]:
    """The recorder calls one timeline row stands for (scenarios/README.md)."""
    t, ev = float(row["t"]), row["ev"]
    w = _when(t)
    simple = {
        "job_start": "record_job_start_time",
        "job_end": "record_job_end_time",
        "accel_init_start": "record_tpu_init_start_time",
        "accel_init_end": "record_tpu_init_end_time",
        "training_prep_start": "record_training_preparation_start_time",
        "training_prep_end": "record_training_preparation_end_time",
        "data_loading_start": "record_data_loading_start_time",
        "data_loading_end": "record_data_loading_end_time",
    }
    if ev in simple:
        name = simple[ev]
        return [lambda r: getattr(r, name)(w)]
    if ev == "step_start":
        step = int(row["step"])
        return [lambda r: r.record_step_start_time(step, w)]
    if ev in ("custom_start", "custom_end"):
        kind = row["name"]
        if ev == "custom_start":
            return [lambda r: r.record_custom_badput_event_start_time(w, kind)]
        return [lambda r: r.record_custom_badput_event_end_time(w, kind)]
    if ev in ("ckpt_save", "ckpt_restore"):
        step = int(row["step"])
        end = _when(t + float(row["blocking_s"] if ev == "ckpt_save" else row["duration_s"]))
        what = "save" if ev == "ckpt_save" else "restore"
        return [
            lambda r: getattr(r, f"record_checkpoint_{what}_start_time")(step, w),
            lambda r: getattr(r, f"record_checkpoint_{what}_end_time")(step, end),
        ]
    raise AssertionError(f"not a public-API event: {ev}")


def _scenario(name: str) -> tuple[dict[str, Any], list[Call]]:
    lines = [json.loads(x) for x in (DATA / f"{name}.jsonl").read_text().splitlines() if x.strip()]
    calls = [c for row in lines[1:] for c in _calls(row)]
    return lines[0], calls


SCENARIOS = {name: _scenario(name) for name in PUBLIC}


def _check(header: dict[str, Any], calls: list[Call]) -> None:
    job = header["job_name"]
    url = f"memory://order-{job}-{next(_ids)}"
    rec = goodput.Recorder(job, f"goodput_{job}", True, store=url, process_index=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # anything but our misuse warnings would be a bug
        warnings.simplefilter("ignore", mlgoodput.MlGoodputWarning)
        for call in calls:
            call(rec)
    assert rec.close(30)
    q = ORIGIN + float(header["queries"][-1])
    calc = goodput.GoodputCalculator(job, f"goodput_{job}", store=url, clock=lambda: q)
    r = calc.report()
    assert_matches_truth(r, header["truth"], TOL)


@pytest.mark.parametrize("name", PUBLIC)
def test_in_order_gives_the_truth(name: str) -> None:
    _check(*SCENARIOS[name])


@st.composite
def _shuffled(draw: st.DrawFn) -> tuple[dict[str, Any], list[Call]]:
    name = draw(st.sampled_from(PUBLIC))
    header, calls = SCENARIOS[name]
    order = draw(st.permutations(range(len(calls))))
    dups = draw(st.lists(st.integers(0, len(calls) - 1), max_size=30))
    out = [calls[i] for i in order]
    for i in dups:  # a repeated call lands anywhere (a retry, a replayed journal)
        out.insert(draw(st.integers(0, len(out))), calls[i])
    return header, out


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(_shuffled())
def test_any_order_and_duplicates_give_the_truth(case: tuple[dict[str, Any], list[Call]]) -> None:
    _check(*case)
