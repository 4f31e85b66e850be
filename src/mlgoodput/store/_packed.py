"""Shorter stored forms of a chunk's packed columns, for a store whose server compresses and
logs every byte it is sent (PostgreSQL).

Most of what an append costs a PostgreSQL server is its bytes: received, compressed (lz4),
written to the WAL. A chunk of one host's step events repeats itself: its kinds, hosts and
values (NaN) are one item n times, and the high bytes of its times and steps barely change.
So a column of `n` items of `width` bytes is stored as one of:

- its plain bytes (`width * n` bytes): what older rows hold, and what `pack` keeps when
  nothing shorter applies (one item, or single-byte kinds that vary);
- one item (`width` bytes, n > 1): that item repeated n times;
- the tag byte `SHUFFLED`, then the same bytes regrouped by their place in the item: every
  item's first byte, then every item's second byte, ... (`width * n + 1` bytes). The long
  runs of equal high bytes are what lz4 then compresses well;
- for a column of 8-byte integers (steps) whose items differ from the one before by -128 to
  127 (steps counting by one, or a start and an end event per step): the tag byte `DELTAS`,
  the first item, then each later item's difference as one signed byte (`n + 8` bytes; made
  where numpy is there, read with or without it).

A plain or one-item row says so by its length (never the length of a tagged form); a tagged
form by its tag, checked against its length. `unpack` gives back exactly the plain bytes.
"""

from __future__ import annotations

from array import array
from itertools import accumulate

from mlgoodput._numpy import numpy
from mlgoodput.store._protocol import StoreError

SHUFFLED = 1
DELTAS = 2
FAST_MIN = 4096  # items from which numpy (when there) looks for the DELTAS form
_DELTA_BOUND = 2**62  # items within +-this: a difference is the same in int64 and in Python


def pack(data: bytes, width: int, n: int, *, integers: bool = False) -> bytes:
    """`data` (n items of `width` bytes; native int64 when `integers`) in its shortest stored form."""
    if n < 2:
        return data
    first = data[:width]
    if data.endswith(first) and data == first * n:
        return first
    if width < 2:
        return data
    if integers and width == 8 and n >= FAST_MIN and (np := numpy()) is not None:
        a = np.frombuffer(data, dtype=np.int64)
        if a.min() >= -_DELTA_BOUND and a.max() <= _DELTA_BOUND:
            d = np.diff(a)
            if d.min() >= -128 and d.max() <= 127:
                small: bytes = d.astype(np.int8).tobytes()
                return bytes((DELTAS,)) + first + small
    return bytes((SHUFFLED,)) + b"".join([data[i::width] for i in range(width)])


def unpack(data: bytes, width: int, n: int) -> bytes:
    """The plain bytes of a column stored by `pack` (or plain, as older rows hold it)."""
    size = len(data)
    if size == width * n:
        return data
    if size == width:
        return data * n
    if size == width * n + 1 and data[0] == SHUFFLED:
        out = bytearray(size - 1)
        for i in range(width):
            out[i::width] = data[1 + i * n : 1 + (i + 1) * n]
        return bytes(out)
    if width == 8 and size == n + 8 and data[0] == DELTAS:
        start = array("q", data[1:9])[0]
        np = numpy() if n >= FAST_MIN else None
        if np is None:
            return array("q", accumulate(array("b", data[9:]), initial=start)).tobytes()
        out64 = np.empty(n, dtype=np.int64)
        out64[0] = 0
        np.cumsum(np.frombuffer(data, dtype=np.int8, offset=9), dtype=np.int64, out=out64[1:])
        out64 += start
        return bytes(out64.tobytes())
    raise StoreError(f"a stored column of {size} bytes does not hold {n} items of {width} bytes")
