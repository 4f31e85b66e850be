"""The project's formats (`mlgoodput._format`): the texts the CLI prints and core.js matches."""

from __future__ import annotations

import math

import pytest

from mlgoodput._format import GOODPUT_FAIR_PCT, GOODPUT_GOOD_PCT, duration, flops_rate, goodput_level, timestamp


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0 s"),
        (5.7e-4, "570 µs"),
        (0.282, "282 ms"),
        (0.0282, "28.2 ms"),
        (4.27, "4.27 s"),
        (4.0, "4.00 s"),
        (12.34, "12.3 s"),
        (0.9996, "1.00 s"),  # rounds into the next unit, not "1000 ms"
        (59.99, "1 min 00 s"),
        (725.0, "12 min 05 s"),
        (3599.6, "1 h 00 min"),
        (100_090.0, "27 h 48 min"),  # hours go on past a day
        (3 * 86_400.0, "72 h 00 min"),
        (-3.0, "-3.00 s"),
        (None, "-"),
        (math.nan, "-"),
    ],
)
def test_duration(seconds: float | None, text: str) -> None:
    assert duration(seconds) == text


def test_timestamp_is_iso_24_hour_utc_with_the_zone() -> None:
    assert timestamp(1_795_781_465.0) == "2026-11-27 12:11:05 UTC"
    assert timestamp(0.0) == "1970-01-01 00:00:00 UTC"
    assert timestamp(None) == "-"


@pytest.mark.parametrize(
    ("rate", "text"),
    [
        (1e11, "100 GFLOP/s"),
        (123e12, "123 TFLOP/s"),
        (999.6e9, "1.00 TFLOP/s"),
        (2.4e14, "240 TFLOP/s"),
        (1.5e3, "1.50 kFLOP/s"),
        (5.0, "5.00 FLOP/s"),
        (2e21, "2000 EFLOP/s"),
        (None, "-"),
    ],
)
def test_flops_rate_has_si_prefixes(rate: float | None, text: str) -> None:
    assert flops_rate(rate) == text


def test_goodput_levels_follow_the_documented_thresholds() -> None:
    assert (GOODPUT_GOOD_PCT, GOODPUT_FAIR_PCT) == (90.0, 60.0)
    assert [goodput_level(p) for p in (0.0, 8.0, 59.99, 60.0, 89.99, 90.0, 100.0, None)] == [
        "poor",
        "poor",
        "poor",
        "fair",
        "fair",
        "good",
        "good",
        "none",
    ]
