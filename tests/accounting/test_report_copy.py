"""The report's fast paths on every query: `with_productivity` is `dataclasses.replace(r,
productivity=p)` field for field, and `badput_total_s` answers as before for every kind of value."""

from __future__ import annotations

import dataclasses
from typing import Any

from mlgoodput.accounting._figures import CostStats, Productivity
from mlgoodput.accounting._report import (
    BadputType,
    GoodputReport,
    HostStepStats,
    SliceEfficiency,
    with_productivity,
)

B = BadputType


def _non_default(f: dataclasses.Field[Any], i: int) -> Any:
    """A value for field `f` unlike its default (and unlike every other field's)."""
    if f.name == "badput_s":
        return {B.STALL: 1.0 + i, B.CUSTOM_BADPUT_EVENTS: {"eval": 2.0}}
    if f.name == "overlapped_s":
        return {B.DATA_LOADING_ASYNC: 3.0 + i}
    if f.name == "slice_efficiency":
        return SliceEfficiency(50.0, 75.0)
    if f.name == "hosts":
        return (HostStepStats(1, 10, 0.5, 0.6, 0.7),)
    if f.name == "productivity":
        return None
    if f.name == "status":
        return "finished"
    if f.name == "stops":
        return ((5.0, 6.0),)
    if f.name in ("job_name", "logger_name"):
        return f"{f.name}-{i}"
    if f.name in ("disruptions", "last_step", "max_productive_step"):
        return 100 + i
    return 1000.0 + i


def _productivity() -> Productivity:
    values: dict[str, Any] = {}
    for i, f in enumerate(dataclasses.fields(Productivity)):
        if f.name in ("checkpoint_save", "checkpoint_restore"):
            values[f.name] = CostStats(i, 1.0, 2.0)
        elif f.name in ("attempts", "recoveries_s", "notes", "disruptions"):
            values[f.name] = ()
        elif f.name in ("peak_source", "submit_source"):
            values[f.name] = "recorded"
        else:
            values[f.name] = i + 0.5
    return Productivity(**values)


def test_with_productivity_copies_every_field_as_replace_does() -> None:
    fields = dataclasses.fields(GoodputReport)
    r = GoodputReport(**{f.name: _non_default(f, i) for i, f in enumerate(fields)})
    for f in fields:  # every field differs from its default, so a field left out would show
        if f.name != "productivity" and f.default is not dataclasses.MISSING:
            assert getattr(r, f.name) != f.default, f.name
    p = _productivity()
    got = with_productivity(r, p)
    want = dataclasses.replace(r, productivity=p)
    assert got == want
    assert [getattr(got, f.name) for f in fields] == [getattr(want, f.name) for f in fields]
    assert got.productivity is p and got.to_dict() == want.to_dict()


def test_badput_total_s_of_every_kind_of_value() -> None:
    r = GoodputReport(
        "j",
        "l",
        0.0,
        10.0,
        10.0,
        2.0,
        {B.STALL: 1.5, B.OTHER: 3, B.CUSTOM_BADPUT_EVENTS: {"a": 1.0, "b": 0.25}},
        {},
        0,
        None,
        None,
        0.0,
    )
    assert r.badput_total_s(B.STALL) == 1.5
    got = r.badput_total_s(B.OTHER)  # an int stored: a float comes back, as before
    assert got == 3.0 and type(got) is float
    assert r.badput_total_s(B.CUSTOM_BADPUT_EVENTS) == 1.25
    assert r.badput_total_s(B.TRAINING_PREP) == 0.0
