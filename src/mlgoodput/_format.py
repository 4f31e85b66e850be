"""The project's formats for a person: durations, timestamps, FLOP/s and the goodput level.

The web UI has the same functions in `ui/static/core.js` (`secs`, `when`, `flops`,
`goodputLevel`); tests/ui/test_layout.py checks that both give the same text.

- A duration has one unit below a minute and two above: "570 µs", "282 ms", "4.27 s",
  "12 min 05 s", "27 h 48 min" (hours go on past a day), "0 s".
- A timestamp is ISO 8601, 24-hour, in UTC, with the zone: "2026-11-27 12:11:05 UTC".
- A FLOP rate has an SI prefix and three significant digits: "123 TFLOP/s".
"""

from __future__ import annotations

import datetime as dt
import math

#: Goodput (%) at or above this is shown as good (green).
GOODPUT_GOOD_PCT = 90.0
#: Goodput (%) at or above this, and below GOODPUT_GOOD_PCT, is shown as fair (amber); below, poor (red).
GOODPUT_FAIR_PCT = 60.0

_SI = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _round_half_up(v: float, digits: int) -> float:
    """`v` rounded to `digits` decimals, halves away from zero (as JavaScript's Math.round does
    for positive numbers), so both sides print the same text."""
    k = 10.0**digits
    return math.floor(abs(v) * k + 0.5) / k


def _three_digits(v: float) -> str:
    """A non-negative number with three significant digits: 570, 28.2, 4.27."""
    if v == 0:
        return "0"
    d = max(0, 2 - math.floor(math.log10(v)))
    r = _round_half_up(v, d)
    if r >= 10 ** (3 - d) and d > 0:  # 9.996 -> 10.0, not 10.00
        d -= 1
        r = _round_half_up(v, d)
    return f"{r:.{d}f}"


def duration(s: float | None) -> str:
    """Seconds as a person reads them: "282 ms", "4.27 s", "12 min 05 s", "27 h 48 min"; "-" for None or NaN."""
    if s is None or math.isnan(s):
        return "-"
    if math.isinf(s):
        return "∞" if s > 0 else "-∞"
    sign = "-" if s < 0 else ""
    a = abs(s)
    if a == 0:
        return "0 s"
    for scale, unit, below in ((1e-6, "µs", 1000.0), (1e-3, "ms", 1000.0), (1.0, "s", 60.0)):
        if a < scale * below:
            text = _three_digits(a / scale)
            if float(text) < below:  # 999.6 ms is "1.00 s", 59.996 s is "1 min 00 s"
                return f"{sign}{text} {unit}"
    whole = math.floor(a + 0.5)
    if whole < 3600:
        return f"{sign}{whole // 60} min {whole % 60:02d} s"
    minutes = math.floor(a / 60 + 0.5)
    return f"{sign}{minutes // 60} h {minutes % 60:02d} min"


def timestamp(t: float | None) -> str:
    """UNIX seconds as "2026-11-27 12:11:05 UTC" (ISO 8601, 24-hour, UTC); "-" for None."""
    if t is None or math.isnan(t):
        return "-"
    try:
        return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (ValueError, OverflowError, OSError):
        return f"{t:.0f}"


def flops_rate(x: float | None) -> str:
    """FLOP/s with an SI prefix and three significant digits: "123 TFLOP/s"; "-" for None."""
    if x is None or math.isnan(x):
        return "-"
    sign = "-" if x < 0 else ""
    a = abs(x)
    unit, scale = "", 1.0
    for sc, prefix in reversed(_SI):  # the largest prefix that leaves at least 1
        if a >= sc or float(_three_digits(a / sc)) >= 1:  # 999.6 GFLOP/s is 1.00 TFLOP/s
            unit, scale = prefix, sc
    return f"{sign}{_three_digits(a / scale)} {unit}FLOP/s"


def goodput_level(pct: float | None) -> str:
    """ "good" (>= GOODPUT_GOOD_PCT), "fair" (>= GOODPUT_FAIR_PCT), "poor", or "none" for no figure."""
    if pct is None or math.isnan(pct):
        return "none"
    if pct >= GOODPUT_GOOD_PCT:
        return "good"
    if pct >= GOODPUT_FAIR_PCT:
        return "fair"
    return "poor"
