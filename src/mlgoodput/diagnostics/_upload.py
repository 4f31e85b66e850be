"""Uploading finished traces to a remote profile directory (any fsspec URL) in the background.

A capture for a run whose `gcs_path` is a URL first files its trace on local disk (the
run's local profile directory, same layout), so `xprof.stop()` never waits for the network
and a trace is never lost. This worker then copies the files to the URL and deletes the
local copies once every file is up. When an upload fails, or the run ends before it is
done, the files stay where they are and a warning and a log line say where.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path

from mlgoodput._misuse import MlGoodputWarning
from mlgoodput._worker import BackgroundWorker

log = logging.getLogger("mlgoodput.diagnostics")


@dataclass(frozen=True, slots=True)
class UploadJob:
    """One session's trace files of this process: local copies and the remote directory."""

    session: str
    local_dir: Path
    names: tuple[str, ...]
    remote_dir: str


def say(text: str) -> None:
    """A warning and a log line: how a lost upload is made visible."""
    log.warning("%s", text)
    warnings.warn(text, MlGoodputWarning, stacklevel=2)


class ProfileUploader(BackgroundWorker):
    """Copies queued traces to their remote directory; never raises into the caller."""

    batch_size = 1  # one session per round: a job in progress is `_current`

    def __init__(self) -> None:
        super().__init__("mlgoodput-profile-upload", interval_s=1.0)
        self._current: UploadJob | None = None
        self.uploaded = 0  # sessions fully uploaded
        self.failed: list[tuple[UploadJob, str]] = []  # sessions kept locally, with why

    def pending(self) -> list[UploadJob]:
        """Sessions not uploaded yet: the one in progress, then the queued ones."""
        cur = self._current
        return [*([cur] if cur is not None else []), *self._queue.items()]

    def _backlog(self) -> int:
        return len(self.pending())

    def _handle(self, items: list[UploadJob]) -> None:
        for job in items:
            self._current = job
            self._upload(job)
            self._current = None

    def _upload(self, job: UploadJob) -> None:
        try:
            import fsspec

            fs, root = fsspec.core.url_to_fs(job.remote_dir)
            fs.makedirs(root, exist_ok=True)
            for name in job.names:
                fs.put_file(str(job.local_dir / name), f"{root}/{name}")
        except Exception as e:  # any backend failure: the local copy is the trace
            why = " ".join(f"{type(e).__name__}: {e}".split())  # one line
            self.failed.append((job, why))
            say(
                f"mlgoodput: profile session {job.session}: upload to {job.remote_dir} failed ({why}); "
                f"the trace is kept in {job.local_dir}"
            )
            return
        for name in job.names:
            try:
                (job.local_dir / name).unlink()
            except OSError:
                pass
        for d in (job.local_dir, *job.local_dir.parents[:3]):  # <session>, profile, plugins, <run>
            try:
                d.rmdir()  # only when empty
            except OSError:
                break
        self.uploaded += 1
        log.info("mlgoodput: profile session %s uploaded to %s", job.session, job.remote_dir)

    def close(self, timeout_s: float | None = None) -> bool:
        """Finish the uploads within `timeout_s`; whatever is left stays on local disk (warned)."""
        ok = super().close(timeout_s)
        for job in self.pending():
            say(
                f"mlgoodput: profile session {job.session}: upload to {job.remote_dir} did not finish "
                f"before the run ended; the trace is kept in {job.local_dir}"
            )
        return ok
