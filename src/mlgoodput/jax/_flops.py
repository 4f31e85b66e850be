"""Automatic step FLOPs: a jitted step function that records the compiler's FLOPs count
whenever it compiles for new arguments."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from mlgoodput._misuse import MlGoodputMisuseError
from mlgoodput.events import Kind
from mlgoodput.flops import jax_step_flops
from mlgoodput.jax._session import current

log = logging.getLogger("mlgoodput.jax")


def track_step_flops(fn: Callable[..., Any], recorder: Any = None) -> Callable[..., Any]:
    """Wrap a `jax.jit` step function: after a call that compiled it (its compilation cache
    grew), dated to that call's start, the FLOPs of one call with those arguments (`Compiled.cost_analysis()`, served
    from the cache, so well under a millisecond) become the job's step FLOPs, through
    `recorder.record_step_flops` or else the recorder given to `mlgoodput.jax.init`. A call
    that did not compile costs one integer comparison. Never raises into training: a
    failure is logged once and the step's result is returned as always."""
    cache_size = getattr(fn, "_cache_size", None)
    if cache_size is None or not hasattr(fn, "lower"):
        raise TypeError(f"track_step_flops needs a jax.jit function, got {fn!r}")
    seen = [cache_size()]
    warned = [False]

    def _record(args: tuple[Any, ...], kwargs: dict[str, Any], t0: float) -> None:
        flops = jax_step_flops(fn, *args, **kwargs)
        if flops is None:
            return
        if recorder is not None:
            recorder.record_step_flops(flops, effective_time=t0)
            return
        session = current()
        sink = session.compile_sink if session is not None else None
        if sink is None:
            raise RuntimeError("no recorder: pass recorder= or call mlgoodput.jax.init(recorder=...)")
        sink.append(Kind.STEP_FLOPS, t0, None, flops)

    @functools.wraps(fn)
    def step(*args: Any, **kwargs: Any) -> Any:
        t0 = time.time()  # the new FLOPs hold from the start of the call that compiled them
        out = fn(*args, **kwargs)
        n = cache_size()
        if n != seen[0]:
            seen[0] = n
            try:
                _record(args, kwargs, t0)
            except MlGoodputMisuseError:
                raise  # strict mode asked for misuse to raise (users' own tests)
            except Exception as e:
                if not warned[0]:
                    warned[0] = True
                    log.warning("mlgoodput.jax: could not record the step's FLOPs: %s", e)
        return out

    return step
