"""A chunk's first and last time (`_columns.encode`): numpy on a long column gives exactly
what min() and max() give, NaN and signed zeros included, and numpy off changes nothing."""

from __future__ import annotations

import math
import struct
from array import array

import pytest

from mlgoodput.store._columns import FAST_MIN, Columns, encode


def _chunk_range(times: list[float]) -> tuple[bytes, bytes]:
    n = len(times)
    cols = Columns(
        bytearray(n), array("d", times), array("i", [0] * n), array("q", [0] * n), array("d", [0.0] * n), None, None
    )
    ch = encode(cols)
    return struct.pack("<d", ch.t_min), struct.pack("<d", ch.t_max)


def _builtin(times: list[float]) -> tuple[bytes, bytes]:
    if not times:
        return struct.pack("<d", 0.0), struct.pack("<d", 0.0)
    return struct.pack("<d", min(times)), struct.pack("<d", max(times))


@pytest.mark.parametrize(
    "times",
    [
        [],
        [1.7e9 + i * 0.01 for i in range(FAST_MIN)],
        [1.7e9 - i * 0.5 for i in range(FAST_MIN * 3)],
        [math.sin(i) * 1e3 for i in range(FAST_MIN + 1)],
        [5.0] * 10 + [math.nan] + [float(i) for i in range(FAST_MIN)],
        [math.nan] + [float(i + 1) for i in range(FAST_MIN)],
        [0.0, -0.0] * FAST_MIN,
        [-0.0, 3.0, 0.0, -2.0] * FAST_MIN,
        [-0.0] + [float(i + 1) for i in range(FAST_MIN)],
        [math.inf, -math.inf, 1.0] * FAST_MIN,
        [2.5] * 3,
    ],
    ids=lambda t: f"{len(t)} times",
)
def test_time_range_is_min_and_max(times: list[float], numpy_mode: str) -> None:
    assert _chunk_range(times) == _builtin(times)
