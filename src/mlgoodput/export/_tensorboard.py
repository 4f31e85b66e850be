"""TensorBoardExporter: scalars in TensorBoard event files, written synchronously so failures show."""

from __future__ import annotations

import fcntl
import functools
import math
import os
import socket
import struct
import time
from collections.abc import Iterator, Sequence
from typing import Any

from mlgoodput.export._base import Sample
from mlgoodput.export._names import check_name, tensorboard_tag
from mlgoodput.export._registry import register_exporter
from mlgoodput.export._series import SeriesLabels
from mlgoodput.export._tb_layout import condense_jax, layout, max_steps

#: The lock file an exclusive writer holds in its folder (TensorBoard ignores it).
LOCK_NAME = ".mlgoodput-tensorboard.lock"
#: How long an exclusive writer waits for the folder's previous writer to finish.
LOCK_WAIT_S = 5.0


def _require_tensorboardx() -> Any:
    try:
        from tensorboardX.proto import event_pb2, summary_pb2
        from tensorboardX.record_writer import RecordWriter
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError("TensorBoardExporter needs tensorboardX: pip install 'mlgoodput[tensorboard]'") from e
    return event_pb2, summary_pb2, RecordWriter


class TensorBoardExporter:
    """Write each sample as a scalar under its tag (see docs/exporting.md) in `logdir`.

    The step axis is the sample's `step` (the monitor sets the job's last step) or, when a
    sample has none, one more than the tag's last step. Steps never go back for a tag, across
    processes too (a new writer continues from what the folder holds), because TensorBoard
    drops points when they do. JAX series are summed over their per-function labels and a
    chart layout is written (see `_tb_layout`). A write error (a full disk) raises, closes
    the file and starts a fresh one on the next attempt, so a retry never appends after a
    torn record.

    `exclusive=True` (the goodput monitor) holds a lock on the folder while the exporter
    runs, so a second monitor writing the same charts there fails at start instead of
    doubling every point.
    """

    def __init__(
        self, logdir: str | os.PathLike[str], *, exclusive: bool = False, lock_wait_s: float = LOCK_WAIT_S
    ) -> None:
        if not isinstance(logdir, (str, os.PathLike)) or not os.fspath(logdir).strip():
            raise TypeError(f"logdir must be a directory path, got {logdir!r}")
        self.logdir = os.fspath(logdir)
        self.exclusive = exclusive
        self.lock_wait_s = lock_wait_s
        self.uploads = 0
        self._writer: Any = None
        self._last_step: dict[str, int] | None = None  # tag -> last step written (read on first open)
        self._layout_written: set[str] = set()
        self._lock_fd: int | None = None
        self._tags: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}  # checked (name, labels) -> tag
        self._heads: dict[str, bytes] = {}  # tag -> its summary value's bytes before the scalar (_head)

    def __repr__(self) -> str:
        return f"TensorBoardExporter({self.logdir!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {
            "logdir": self.logdir,
            "uploads": self.uploads,
            "exclusive": self.exclusive,
            "lock_wait_s": self.lock_wait_s,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(  # type: ignore[misc]
            state["logdir"],
            exclusive=state.get("exclusive", False),
            lock_wait_s=state.get("lock_wait_s", LOCK_WAIT_S),
        )
        self.uploads = state["uploads"]

    def start(self) -> None:
        """Take the folder's lock when exclusive; raises ValueError naming the other writer, and
        OSError where the folder cannot be written (retried by the exporter process)."""
        if not self.exclusive or self._lock_fd is not None:
            return
        os.makedirs(self.logdir, exist_ok=True)
        path = os.path.join(self.logdir, LOCK_NAME)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        # the writer of a killed attempt may still be finishing its last upload: give it a while
        deadline = time.monotonic() + self.lock_wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() < deadline:
                    time.sleep(0.1)
                    continue
                other = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise ValueError(
                    f"another mlgoodput process (pid {other}) is writing TensorBoard files to {self.logdir};"
                    " two writers would double every chart: give each monitor its own tensorboard_dir"
                ) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        except OSError:  # a full disk: let the lock go with the file, so a retry can take it
            os.close(fd)
            raise
        self._lock_fd = fd

    def _open(self) -> Any:
        event_pb2, _, RecordWriter = _require_tensorboardx()
        os.makedirs(self.logdir, exist_ok=True)
        now = time.time()
        # names sort in creation order (TensorBoard reads the files of a run in name order)
        stamp = f"{int(now):010d}{int((now % 1) * 1e6):06d}"
        fname = f"events.out.tfevents.{stamp}.{socket.gethostname()}.{os.getpid()}.mlgoodput"
        w = RecordWriter(os.path.join(self.logdir, fname))
        ev = event_pb2.Event(wall_time=now, file_version="brain.Event:2")
        w.write(ev.SerializeToString())
        return w

    def export(self, samples: Sequence[Sample]) -> None:
        event_pb2, summary_pb2, _ = _require_tensorboardx()
        self.uploads += 1
        now = time.time()
        try:
            if self._writer is None:
                self.start()
                self._writer = self._open()
                self._layout_written = set()
            if self._last_step is None:
                self._last_step = max_steps(self.logdir)
            last = self._last_step
            tags = self._tags
            if len(tags) > 100_000:  # series come and go (windows, ranks): keep it bounded
                tags.clear()
            heads = self._heads
            if len(heads) > 100_000:
                heads.clear()
            written = self._layout_written
            seen: list[str] = []  # the tags of this upload
            families: set[str] = set()  # their families not yet in the layout
            records: list[bytes] = []
            pre_wall: float | None = None
            pre_step = 0
            pre: bytes | None = None  # the wall-time and step fields the last sample had
            # samples in a row with one wall time and step go in one event, a value each
            group: list[bytes] = []  # the values of the event being made
            group_pre = b""  # its wall-time and step fields
            jax: list[Sample] = []
            for batch, condensed in _jax_last(samples, jax):  # as condense_jax orders them
                for s in batch:
                    name = s.name
                    labels = s.labels
                    if type(labels) is SeriesLabels:  # named, checked and encoded once for the series
                        info = labels.memo.get(name) or labels.info(name)
                        tb = info.tb
                        if tb is None:
                            if not condensed and name.startswith("jax/"):
                                jax.append(s)
                                continue
                            check_name(name, labels)
                            t = tensorboard_tag(name, labels)
                            tb = (t, _head(t), t.split("/", 1)[0])
                            if not name.startswith("jax/"):
                                info.tb = tb
                        tag, head, fam = tb
                    elif not condensed and name.startswith("jax/"):
                        jax.append(s)
                        continue
                    else:
                        tag, head, fam = self._plain_tag(s)
                    prev = last.get(tag, 0)
                    st = s.step
                    if st is None:
                        step = prev + 1
                    else:
                        step = int(st)
                        if step < prev:
                            step = prev
                    last[tag] = step
                    seen.append(tag)
                    if fam not in written:
                        families.add(fam)
                    at = s.time
                    wall = now if at is None else at
                    value = float(s.value)
                    if wall != pre_wall or step != pre_step:
                        pre_wall, pre_step, pre = wall, step, _prefix(wall, step)
                    entry = None
                    if pre is not None and math.isfinite(value):  # as _scalar_event
                        try:
                            entry = head + _FLOAT.pack(value)
                        except OverflowError:  # beyond float32: protobuf makes it inf
                            pass
                    if entry is not None:
                        if pre is not group_pre or len(group) >= _EVENT_VALUES:
                            if group:
                                records.append(_event(group_pre, group))
                                group = []
                            group_pre = pre  # type: ignore[assignment]
                        group.append(entry)
                        continue
                    # a value our encoder leaves to protobuf (see _scalar_event): an event of its own
                    if group:
                        records.append(_event(group_pre, group))
                        group = []
                    pb = summary_pb2.Summary.Value(tag=tag, simple_value=value)
                    ev = event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=[pb]))
                    records.append(ev.SerializeToString())
            if group:
                records.append(_event(group_pre, group))
            if families:
                self._write_layout(seen, families, now)
            _write_records(self._writer, records)
            self._writer.flush()
        except BaseException:
            self._close_quietly()
            raise

    def _plain_tag(self, s: Sample) -> tuple[str, bytes, str]:
        """(tag, encoded prefix, tag family) of a sample whose labels are not SeriesLabels."""
        tags, key = self._tags, (s.name, tuple(s.labels.items()))
        try:
            tag = tags.get(key)
            cache = True
        except TypeError:  # a label value that cannot be hashed: named each time
            tag, cache = None, False
        if tag is None:  # a series not seen yet: checked, and named, once
            check_name(s.name, s.labels)
            tag = tensorboard_tag(s.name, s.labels)
            if cache:
                tags[key] = tag
        heads = self._heads
        head = heads.get(tag)
        if head is None:
            head = heads[tag] = _head(tag)
        return tag, head, tag.split("/", 1)[0]

    def _write_layout(self, tags: list[str], families: set[str], now: float) -> None:
        """The chart layout for the tag families (`families`, those of `tags`) not yet
        described in this file."""
        families = families - self._layout_written
        if not families:
            return
        from tensorboardX.proto import event_pb2
        from tensorboardX.summary import custom_scalars

        self._layout_written |= families
        charts = layout(tags)
        if charts:
            ev = event_pb2.Event(wall_time=now, step=0, summary=custom_scalars(charts))
            self._writer.write(ev.SerializeToString())

    def _close_quietly(self) -> None:
        w, self._writer = self._writer, None
        if w is not None:
            try:
                w.close()
            except Exception:
                pass

    def shutdown(self, timeout_s: float | None = None) -> None:
        self._close_quietly()
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)


def _jax_last(samples: Sequence[Sample], jax: list[Sample]) -> Iterator[tuple[Sequence[Sample], bool]]:
    """The export loop's two passes: the samples (it puts the JAX ones aside in `jax`), then
    those condensed (condense_jax: the other samples in order, then the JAX ones summed)."""
    yield samples, False
    if jax:
        yield condense_jax(jax), True


_DOUBLE, _FLOAT, _LEN, _CRC = struct.Struct("<d"), struct.Struct("<f"), struct.Struct("Q"), struct.Struct("I")


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _head(tag: str) -> bytes:
    """A summary value's bytes up to its scalar's four, for one tag:
    value (1) { tag (1), simple_value (2, a float) }."""
    t = tag.encode()
    value = b"\x0a" + _varint(len(t)) + t + b"\x15"  # + 4 bytes of float
    return b"\x0a" + _varint(len(value) + 4) + value


#: At most this many values in one event (an upload at 256 hosts has some 1,600 scalars).
_EVENT_VALUES = 512


def _event(pre: bytes, values: list[bytes]) -> bytes:
    """An Event from its wall-time and step fields and its summary's values (each `_head` and
    its four bytes): `Event(wall_time, step, summary=Summary(value=[...]))` as protobuf writes it."""
    summary = b"".join(values)
    return pre + b"\x2a" + _varint(len(summary)) + summary


def _scalar_event(heads: dict[str, bytes], tag: str, wall: float, step: int, value: float) -> bytes | None:
    """The serialized `Event(wall_time, step, summary=Summary(value=[Value(tag, simple_value)]))`,
    byte for byte what protobuf writes (fields in number order; tests compare), from a cached
    prefix per tag; None for what protobuf treats apart (a zero wall time or step, which it
    leaves out; a value that is not a finite float32), then the caller asks protobuf.
    (TensorBoardExporter.export does the same inline, several values to an event.)"""
    pre = _prefix(wall, step)
    if pre is None or not math.isfinite(value):
        return None
    try:
        v = _FLOAT.pack(value)
    except OverflowError:  # beyond float32: protobuf makes it inf
        return None
    head = heads.get(tag)
    if head is None:
        head = heads[tag] = _head(tag)
    return _event(pre, [head + v])


def _prefix(wall: float, step: int) -> bytes | None:
    """An Event's wall-time and step fields (what precedes the summary), or None when
    protobuf would write them differently (a zero it leaves out, a wall time not finite)."""
    if not (wall and math.isfinite(wall) and 0 < step < 1 << 63):
        return None
    return b"\x09" + _DOUBLE.pack(wall) + _step_field(step)


@functools.lru_cache(maxsize=256)
def _step_field(step: int) -> bytes:
    """The step field's bytes (an upload's samples mostly share one step)."""
    return b"\x10" + _varint(step)


def _write_records(writer: Any, records: list[bytes]) -> None:
    """TFRecord framing (length, its masked crc32c, data, its masked crc32c), as tensorboardX's
    RecordWriter.write does for each, written to its file in one call."""
    from tensorboardX.crc32c import crc32c  # the crc32c package's C function when installed

    f = getattr(writer, "_writer", None)
    if f is None:  # a tensorboardX whose writer keeps its file elsewhere: one record a call
        for data in records:
            writer.write(data)
        return
    out = bytearray()
    headers = _HEADERS
    pack = _CRC.pack
    for data in records:
        n = len(data)
        head = headers.get(n)
        if head is None:  # the length and its checksum: the same for every record of that size
            if len(headers) > 4096:
                headers.clear()
            h = _LEN.pack(n)
            head = headers[n] = h + pack(_mask(crc32c(h)))
        c = crc32c(data)
        out += head
        out += data
        out += pack((((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF)  # _mask, inline
    f.write(out)


_HEADERS: dict[int, bytes] = {}  # record length -> its framing header


def _mask(x: int) -> int:
    """TFRecord's masked crc32c (tensorboardX's masked_crc32c, in one expression)."""
    return (((x >> 15) | (x << 17)) + 0xA282EAD8) & 0xFFFFFFFF


register_exporter("tensorboard", TensorBoardExporter)
