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
  runs of equal high bytes are what lz4 then compresses well.

The three lengths never coincide, so a row says by its length which form it holds, and
`unpack` gives back exactly the plain bytes whichever it is.
"""

from __future__ import annotations

from mlgoodput.store._protocol import StoreError

SHUFFLED = 1


def pack(data: bytes, width: int, n: int) -> bytes:
    """`data` (n items of `width` bytes) in its shortest stored form."""
    if n < 2:
        return data
    first = data[:width]
    if data.endswith(first) and data == first * n:
        return first
    if width < 2:
        return data
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
    raise StoreError(f"a stored column of {size} bytes does not hold {n} items of {width} bytes")
