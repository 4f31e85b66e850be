"""FLOPs of one training step, counted once with FlopCounterMode (for MFU).

The counter wraps one real step (forward, backward, optimizer), entered at the step's start
hook and left at its end hook on the same thread; every other step runs without it. It
counts the first step after the attempt's first one, and only when nothing was compiled:
with PyTorch 2.13, running a `torch.compile`d module under FlopCounterMode (its first call
or any later one) makes it run eagerly for the rest of the process (seen in tests/torch).
So once Dynamo has compiled a frame, the counter stays off and advises, once per job, to
count a training step of the eager module (`mlgoodput.flops.torch_step_flops(model, batch)`:
forward and backward, harmless to the compiled one) and record it with `record_step_flops`.
Steps do the same work, so the count is the same.
Each rank counts its own work; the job's FLOPs per step are that times the world size
(data parallel: every rank does the same work).

Once per job: only rank 0 advises; it says nothing when the job's store already holds step
FLOPs (recorded before the loop by this process, or by an earlier attempt); and the first
advice leaves a marker file beside the job's journals (`step-flops-advice-<hash>`, see
`mlgoodput._recovery.journal_dirs`), so a restart on the same machine (torchrun's elastic
restarts) stays quiet. A restart on a fresh machine whose journals directory is not kept
(a new Kubernetes pod without a volume for it) advises again, once. The check reads the
store, so it runs on a background thread. The job is the recorder given to StepFlops, else
the one given to `mlgoodput.torch.init` (which torch.compile users call to time compiles);
with neither, rank 0 advises once per StepFlops (once per process and recorder).
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from mlgoodput.events import Kind
from mlgoodput.flops import cpu_attention_formulas, flop_counter

__all__ = [
    "COMPILED_ADVICE",
    "StepFlops",
    "advise_compiled",
    "cpu_attention_formulas",
    "dynamo_compiled",
    "flop_counter",
]

log = logging.getLogger("mlgoodput.torch")

#: What rank 0 says, once per job, when a compiled step could not be counted.
COMPILED_ADVICE = (
    "mlgoodput.torch: step FLOPs not counted: this process runs torch.compile'd code, which"
    " FlopCounterMode would turn eager. Count a training step (forward and backward) of the"
    " eager module and record it for the whole job, before the training loop:"
    " gp.recorder.record_step_flops(gp.identity.world_size * mlgoodput.flops.torch_step_flops(model, batch))"
    " (docs/torch.md, 'FLOPs and MFU'; said once per job, on rank 0)"
)


def dynamo_compiled() -> bool:
    """Whether Dynamo compiled any frame in this process (its own counters; never imports)."""
    utils = sys.modules.get("torch._dynamo.utils")
    try:
        return utils is not None and int(utils.counters["frames"].get("total", 0)) > 0
    except Exception:  # counters we do not understand: assume compiled, stay off
        return utils is not None


def _lead(rank: int | None) -> bool:
    """Whether this process is rank 0 (`rank`, else torch.distributed or the launcher's)."""
    if rank is None:
        from mlgoodput.torch._identity import torchrun_identity

        try:
            rank = torchrun_identity().rank
        except ValueError:  # a launcher variable we cannot read: the recorder said so already
            rank = 0
    return rank == 0


class _Stream(NamedTuple):
    """The job's goodput stream: where its events go, and how to ship what is pending."""

    url: str
    namespace: str
    job: str
    flush: Callable[[float], Any]


def _stream(job: Any) -> _Stream | None:
    """The stream of a GoodputRecorder, a TorchRecorder or a journal (None: none of those)."""
    job = getattr(job, "recorder", job)  # a TorchRecorder wraps a GoodputRecorder
    if all(hasattr(job, a) for a in ("store_url", "logger_name", "job_name", "flush")):
        return _Stream(str(job.store_url), str(job.logger_name), str(job.job_name), job.flush)
    if all(hasattr(job, a) for a in ("url", "namespace", "job", "flush")):
        return _Stream(str(job.url), str(job.namespace), str(job.job), job.flush)
    return None


def advice_marker(job: Any) -> Path | None:
    """The marker file of the job of `job` (a recorder or journal): beside its journals."""
    from mlgoodput._recovery import journal_dirs

    st = _stream(job)
    if st is None:
        return None
    key = hashlib.sha256(f"{st.namespace}\0{st.job}".encode()).hexdigest()[:16]
    return journal_dirs(st.url)[0] / f"step-flops-advice-{key}"


def flops_recorded(job: Any, timeout_s: float = 10.0) -> bool | None:
    """Whether the job's stream holds step FLOPs, once what this process recorded is shipped
    (None: the store could not be read)."""
    from mlgoodput.store import open_store

    st = _stream(job)
    if st is None:
        return None
    try:
        st.flush(timeout_s)
        columns = open_store(st.url).read(st.namespace, st.job).columns
        return int(Kind.STEP_FLOPS) in columns.kinds
    except Exception as e:
        log.debug("mlgoodput.torch: could not read the job's step FLOPs: %s", e)
        return None


def _advise_job(job: Any) -> None:
    if flops_recorded(job):
        return
    marker = advice_marker(job)
    try:
        if marker is not None:
            marker.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
    except FileExistsError:
        return  # advised before: an earlier attempt, or another process on this machine
    except OSError as e:  # cannot mark: better said again on a restart than never
        log.debug("mlgoodput.torch: no advice marker %s: %s", marker, e)
    log.warning(COMPILED_ADVICE)


def _session_journal() -> Any:
    """The goodput journal `mlgoodput.torch.init(recorder=...)` sends compiles to, if any."""
    from mlgoodput.torch._compile import current

    s = current()
    return None if s is None else s.compile_sink


def advise_compiled(recorder: Any = None, rank: int | None = None) -> threading.Thread | None:
    """Say `COMPILED_ADVICE` once per job (see the module's doc): nothing off rank 0, nothing
    when the job's store holds step FLOPs or the marker file says it was said. The job is
    `recorder`'s, else that of the recorder given to `mlgoodput.torch.init`; the checks then
    run on a daemon thread, returned (join it to wait). With neither it is said now. Never
    raises."""
    try:
        if not _lead(rank):
            return None
        job = recorder if recorder is not None else _session_journal()
        if _stream(job) is None:  # nothing to check: said now (a StepFlops asks once)
            log.warning(COMPILED_ADVICE)
            return None

        def run() -> None:
            try:
                _advise_job(job)
            except Exception as e:  # never into training, not even from a thread
                log.debug("mlgoodput.torch: step FLOPs advice failed: %s", e)

        t = threading.Thread(target=run, name="mlgoodput-flops-advice", daemon=True)
        t.start()
        return t
    except Exception as e:
        log.debug("mlgoodput.torch: step FLOPs advice failed: %s", e)
        return None


class StepFlops:
    """Counts one step: `begin()` at each step's start (all but one do nothing), `end()` at its
    end -> FLOPs of the job's step.

    `rank` (None: from torch.distributed or the launcher) and `recorder` (the job's
    GoodputRecorder) decide whether a compiled step is advised about (`advise_compiled`)."""

    def __init__(self, world_size: int = 1, skip: int = 1, *, rank: int | None = None, recorder: Any = None) -> None:
        self.world_size = world_size
        self.skip = skip  # steps to let pass first (the compile step)
        self.rank = rank
        self.recorder = recorder
        self.rank_flops: float | None = None
        self.done = False
        self.compiled = False  # not counted: a compiled step would turn eager
        # Stays False: the advice is given here now (`advise_compiled`), once per job; a
        # caller that warned when it was set (older TorchRecorder) stays quiet.
        self.skipped_compiled = False
        self.advice: threading.Thread | None = None  # the advice's checks, while they run
        self._mode: Any = None

    @property
    def counting(self) -> bool:
        return self._mode is not None

    def begin(self) -> None:
        if self.done or self._mode is not None:
            return
        if self.skip > 0:
            self.skip -= 1
            return
        self.done = True  # whatever happens, only one attempt at counting
        if dynamo_compiled():
            self.compiled = True
            self.advice = advise_compiled(self.recorder, self.rank)
            return
        mode: Any = flop_counter()
        mode.__enter__()
        self._mode = mode

    def end(self) -> float | None:
        """Leave the counter; the job's FLOPs per step (None when nothing was counted)."""
        mode, self._mode = self._mode, None
        if mode is None:
            return None
        mode.__exit__(None, None, None)
        total = float(mode.get_total_flops())
        self.rank_flops = total
        return total * self.world_size if total > 0 else None

    def abandon(self) -> None:
        """Leave the counter without recording (the loop stopped inside the first step)."""
        mode, self._mode = self._mode, None
        if mode is not None:
            try:
                mode.__exit__(None, None, None)
            except Exception:
                pass
