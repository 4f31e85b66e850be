"""`track_step_flops`: the FLOP tracking of `mlgoodput.flops`, recording through the JAX session.

The counting lives in `mlgoodput.flops` (`track_jax_step_flops`); what is JAX-integration
here is the default recorder: without `recorder=`, the counts go to the journal of the
recorder given to `mlgoodput.jax.init`, looked up at each record (the session may start after
the wrap).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mlgoodput.events import Kind
from mlgoodput.flops import track_jax_step_flops
from mlgoodput.jax._session import current


class _SessionRecorder:
    """Records step FLOPs through the compile sink of the current `mlgoodput.jax` session."""

    def record_step_flops(self, flops: float, effective_time: float) -> None:
        session = current()
        sink = session.compile_sink if session is not None else None
        if sink is None:
            raise RuntimeError("no recorder: pass recorder= or call mlgoodput.jax.init(recorder=...)")
        sink.append(Kind.STEP_FLOPS, effective_time, None, flops)


def track_step_flops(fn: Callable[..., Any], recorder: Any = None) -> Callable[..., Any]:
    """Wrap a `jax.jit` step function (one call = one training step) so that each step counts
    the FLOPs of the shapes it ran: the compiler's count (`Compiled.cost_analysis()`) of every
    signature the function is called with is learnt once, and whenever a call runs a signature
    whose count differs from the one in effect (a new batch size, a partial last batch, the
    full batches after it), that count becomes the job's step FLOPs, through
    `recorder.record_step_flops` or else the recorder given to `mlgoodput.jax.init`. The
    record is dated to the end of the previous call (or to this wrap, for the first), so it
    covers the step whose start was recorded between the two calls. Never raises into
    training: a failure is logged once and the step's result is returned as always."""
    return track_jax_step_flops(fn, recorder if recorder is not None else _SessionRecorder())
