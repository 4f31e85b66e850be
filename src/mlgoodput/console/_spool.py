"""The console's journal: runs of records the store could not take now, kept on local disk.

A run (one client's records, numbered by the client: a store writer and its sequence
numbers) is written as journal segments, the recorder's file format (`_segment`): the
segment's writer is the client's, and its first record number (`meta["base"]`) the run's
first sequence number. The run is then durable, so the server acknowledges it to the client
at once, and the segments are shipped to the store later, by the server once the store
answers again or by any later process that opens the store (journal recovery). The store
keeps each (writer, number) once, so a run written here and also stored, or sent again by a
client, is stored exactly once.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

from mlgoodput._recovery import journal_dirs, recover_files
from mlgoodput._segment import HEADER_SIZE, NO_STEP, REC, create_segment, encode_extra, write_record
from mlgoodput.events import Event
from mlgoodput.store import Store

log = logging.getLogger("mlgoodput.console")


class Spool:
    """Journal segments of the runs of one console job that wait for the store."""

    def __init__(self, url: str, job: str) -> None:
        self.url = url
        self.job = job
        self.files: list[Path] = []  # written by this process, not yet shipped, in order
        self.written = 0  # events written here
        self.shipped = 0  # events shipped from here to the store

    @property
    def pending(self) -> bool:
        return bool(self.files)

    def write(self, namespace: str, writer: int, first_seq: int, events: Sequence[Event]) -> None:
        """Journal one run (OSError when no file can be made: nothing is then written)."""
        start = 0
        made: list[Path] = []
        try:
            while start < len(events):  # one segment per host: a segment has one host
                host = events[start].host
                end = start + 1
                while end < len(events) and events[end].host == host:
                    end += 1
                made.append(self._segment(namespace, writer, first_seq + start, events[start:end], host))
                start = end
        except BaseException:
            for p in made:
                p.unlink(missing_ok=True)
            raise
        self.files.extend(made)
        self.written += len(events)

    def _segment(self, namespace: str, writer: int, base: int, events: Sequence[Event], host: int) -> Path:
        encoded = [
            encode_extra(e.name, None if e.attrs is None else dict(e.attrs))
            if (e.name is not None or e.attrs is not None)
            else (0, b"", 0)
            for e in events
        ]
        size = HEADER_SIZE + sum((REC + len(x) + 7) & ~7 for _, x, _ in encoded)
        meta = {"store": self.url, "namespace": namespace, "job": self.job, "host": host, "base": base}
        seg = create_segment(journal_dirs(self.url)[0], size, host, meta, writer)
        try:
            off = seg.off
            for i, (e, (flags, extra, name_len)) in enumerate(zip(events, encoded, strict=True)):
                off += write_record(
                    seg.buf,
                    off,
                    i,
                    int(e.kind),
                    flags,
                    name_len,
                    e.time,
                    NO_STEP if e.step is None else e.step,
                    math.nan if e.value is None else e.value,
                    extra,
                )
            seg.count, seg.off = len(events), off
            seg.seal()  # it holds exactly these: a recoverer counts any damage exactly
        except BaseException:
            seg.release(delete=True)
            raise
        path = seg.path
        seg.release(delete=False)  # unlocked: any process that opens the store may ship it
        assert path is not None
        return path

    def ship(self, store: Store) -> int:
        """Hand every file written here to the store, in order; raises (OSError) on storage
        trouble. What is not shipped yet stays `pending`: also a file another process is
        shipping right now (a reader recovering journals), which must reach the store before
        any later record of its writer."""
        if not self.files:
            return 0
        files, self.files = self.files, []
        try:
            n = recover_files(store, [p for p in files if p.exists()])
        finally:
            self.files = [p for p in files if p.exists()] + self.files
        self.shipped += n
        return n
