"""TensorBoardExporter: scalars in TensorBoard event files, written synchronously so failures show."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from typing import Any

from mlgoodput.export._base import Sample
from mlgoodput.export._names import check_name, tensorboard_tag


def _require_tensorboardx() -> Any:
    try:
        from tensorboardX.proto import event_pb2, summary_pb2
        from tensorboardX.record_writer import RecordWriter
    except ImportError as e:  # pragma: no cover - depends on the install
        raise ImportError(
            "TensorBoardExporter needs tensorboardX: pip install 'mlgoodput[tensorboard]'"
        ) from e
    return event_pb2, summary_pb2, RecordWriter


class TensorBoardExporter:
    """Write each sample as a scalar under its tag (see docs/exporting.md) in `logdir`.

    The step axis is the sample's `step` (the monitor sets the job's last step) or, when a
    sample has none, the count of uploads this exporter has made. A write error (a full
    disk) raises, closes the file and starts a fresh one on the next attempt, so a retry
    never appends after a torn record.
    """

    def __init__(self, logdir: str | os.PathLike[str]) -> None:
        if not isinstance(logdir, (str, os.PathLike)) or not os.fspath(logdir).strip():
            raise TypeError(f"logdir must be a directory path, got {logdir!r}")
        self.logdir = os.fspath(logdir)
        self.uploads = 0
        self._writer: Any = None

    def __repr__(self) -> str:
        return f"TensorBoardExporter({self.logdir!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {"logdir": self.logdir, "uploads": self.uploads}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.logdir = state["logdir"]
        self.uploads = state["uploads"]
        self._writer = None

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
                self._writer = self._open()
            for s in samples:
                check_name(s.name, s.labels)
                value = summary_pb2.Summary.Value(tag=tensorboard_tag(s.name, s.labels), simple_value=float(s.value))
                ev = event_pb2.Event(
                    wall_time=s.time if s.time is not None else now,
                    step=int(s.step) if s.step is not None else self.uploads,
                    summary=summary_pb2.Summary(value=[value]),
                )
                self._writer.write(ev.SerializeToString())
            self._writer.flush()
        except BaseException:
            self._close_quietly()
            raise

    def _close_quietly(self) -> None:
        w, self._writer = self._writer, None
        if w is not None:
            try:
                w.close()
            except Exception:
                pass

    def shutdown(self, timeout_s: float | None = None) -> None:
        self._close_quietly()
