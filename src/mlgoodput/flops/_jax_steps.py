"""Automatic step FLOPs: a jitted step function that records the compiler's FLOPs of the
shape each call runs (`mlgoodput.jax.track_step_flops` is this with the JAX session's recorder).

One `jax.jit` function holds an executable per argument signature (shapes, dtypes, static
arguments): a partial last batch compiles a second one, and the next epoch's full batches go
back to the first from the cache. So the wrapper keeps the compiler's count per signature,
learnt once when a signature is first seen (`Compiled.cost_analysis()`), and records the
count of the signature a call runs whenever it differs from the one in effect. While the
function holds a single executable a call costs one integer comparison; with several, the
arguments that tell them apart (usually the batch) are reduced to their shapes and looked
up in a dict, a few microseconds.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any

from mlgoodput._misuse import MlGoodputMisuseError
from mlgoodput._once import Once
from mlgoodput.flops._jax import jax_step_flops

log = logging.getLogger("mlgoodput.jax")

_MISSING = object()  # an argument a call did not pass

#: What tells one argument apart from another for the compiler; an int names a positional
#: argument, a str a keyword one.
ArgKey = int | str


def _leaf_signature(x: Any) -> object:
    """What the compiler keys an argument on: a JAX array's abstract value (shape, dtype,
    weak type; one attribute read), else shape and dtype (NumPy), else the type alone (a
    Python number passed as a traced argument compiles once per type, not per value)."""
    aval = getattr(x, "aval", None)
    if aval is not None:
        return aval
    shape = getattr(x, "shape", None)
    if shape is None:
        return type(x)
    return (tuple(shape), getattr(x, "dtype", None))


def _size(sig: object) -> int:
    """How many leaves an argument's signature holds (what looking at it costs)."""
    return len(sig[1]) if isinstance(sig, tuple) and len(sig) == 2 and isinstance(sig[1], tuple) else 0


def _separating(variants: list[dict[ArgKey, object]], counts: list[float | None]) -> tuple[ArgKey, ...]:
    """The arguments a call must be looked at by to tell apart every two variants whose
    counts differ, the cheapest (fewest leaves) first: usually the batch alone, and none
    when all counts agree (a recompile for a new weak type or placement of the parameters)."""
    apart = [
        (a, b)
        for i, (a, fa) in enumerate(zip(variants, counts, strict=True))
        for b, fb in zip(variants[i + 1 :], counts[i + 1 :], strict=True)
        if fa != fb
    ]
    every = dict.fromkeys(k for s in variants for k in s)
    cost = {k: max(_size(s.get(k)) for s in variants) for k in every}
    keys: list[ArgKey] = []
    for k in sorted(every, key=lambda k: cost[k]):  # stable: argument order among equals
        if not apart:
            break
        left = [(a, b) for a, b in apart if a.get(k, _MISSING) == b.get(k, _MISSING)]
        if len(left) < len(apart):
            keys.append(k)
            apart = left
    return tuple(keys)


class _Shapes:
    """The compiled variants one wrapper has seen: FLOPs per argument signature, and which
    arguments tell the variants apart (only those are looked at on a cache hit)."""

    def __init__(self, fn: Any, tree_flatten: Callable[[Any], tuple[list[Any], Any]]) -> None:
        self.fn = fn
        self.flatten = tree_flatten
        info = getattr(fn, "_jit_info", None)  # static arguments are keyed by value, like jit does
        self.static: frozenset[ArgKey] = frozenset(
            (*getattr(info, "static_argnums", ()), *getattr(info, "static_argnames", ()))
        )
        self.known: dict[tuple[tuple[ArgKey, object], ...], float | None] = {}
        self.keys: tuple[ArgKey, ...] | None = None  # None: the whole signature
        self.by_key: dict[object, float | None] = {}

    def arg_signature(self, key: ArgKey, x: Any) -> object:
        if x is _MISSING:
            return _MISSING
        if key in self.static:
            return ("static", x)  # jit requires static arguments to be hashable
        leaves, treedef = self.flatten(x)
        return (treedef, tuple(_leaf_signature(v) for v in leaves))

    def signature(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[ArgKey, object], ...]:
        pos = tuple((i, self.arg_signature(i, a)) for i, a in enumerate(args))
        return pos + tuple((k, self.arg_signature(k, kwargs[k])) for k in sorted(kwargs))

    def lookup_key(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> object:
        """The call's signature reduced to the arguments that tell the known variants apart."""
        keys = self.keys
        if keys is None:
            return self.signature(args, kwargs)
        return tuple(
            self.arg_signature(
                k, (args[k] if k < len(args) else _MISSING) if isinstance(k, int) else kwargs.get(k, _MISSING)
            )
            for k in keys
        )

    def learn(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> float | None:
        """The compiler's count for these arguments, remembered under their signature (the
        latest compile wins when two variants share one, e.g. differing only in sharding).
        A count that fails is remembered as unknown, so it is not tried again on every call."""
        sig = self.signature(args, kwargs)
        err: Exception | None = None
        try:
            v = jax_step_flops(self.fn, *args, **kwargs)
        except Exception as e:
            v, err = None, e
        self.known.pop(sig, None)
        self.known[sig] = v
        variants = [dict(s) for s in self.known]
        if len(variants) < 2:
            self.keys = None
            self.by_key = {sig: v}
        else:
            self.keys = keys = _separating(variants, list(self.known.values()))
            self.by_key = {
                tuple(s.get(k, _MISSING) for k in keys): fl for s, fl in zip(variants, self.known.values(), strict=True)
            }
        if err is not None:
            raise err
        return v


def track_jax_step_flops(fn: Callable[..., Any], recorder: Any) -> Callable[..., Any]:
    """Wrap a `jax.jit` step function (one call = one training step) so that each step counts
    the FLOPs of the shapes it ran: the compiler's count (`Compiled.cost_analysis()`) of every
    signature the function is called with is learnt once, and whenever a call runs a signature
    whose count differs from the one in effect (a new batch size, a partial last batch, the
    full batches after it), that count becomes the job's step FLOPs, through
    `recorder.record_step_flops(flops, effective_time=...)`. The record is dated to the end of
    the previous call (or to this wrap, for the first), so it covers the step whose start was
    recorded between the two calls. Never raises into training: a failure is logged once and
    the step's result is returned as always."""
    cache_size = getattr(fn, "_cache_size", None)
    if cache_size is None or not hasattr(fn, "lower"):
        raise TypeError(f"track_step_flops needs a jax.jit function, got {fn!r}")
    import jax

    shapes = _Shapes(fn, jax.tree_util.tree_flatten)
    seen = [cache_size()]
    check = [True]  # look at this call's arguments (the first call, or several executables)
    current_flops: list[float | None] = [None]  # the count last recorded
    last_end = [time.time()]  # when the previous call returned
    warned = Once()

    def _after(args: tuple[Any, ...], kwargs: dict[str, Any], n: int) -> None:
        if n != seen[0]:  # it compiled (or its cache was cleared): learn this signature
            seen[0] = n
            v = shapes.learn(args, kwargs)
        else:
            try:
                v = shapes.by_key[shapes.lookup_key(args, kwargs)]
            except KeyError:  # compiled before the wrap, or by a call around it
                v = shapes.learn(args, kwargs)
        check[0] = n > 1 or len(shapes.known) > 1
        if v is not None and v != current_flops[0]:
            current_flops[0] = v  # tried once per change, recorded or not
            recorder.record_step_flops(v, effective_time=last_end[0])

    @functools.wraps(fn)
    def step(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        n = cache_size()
        if n != seen[0] or check[0]:
            try:
                _after(args, kwargs, n)
            except MlGoodputMisuseError:
                raise  # strict mode asked for misuse to raise (users' own tests)
            except Exception as e:
                warned.warning(log, "flops", "mlgoodput.jax: could not record the step's FLOPs: %s", e)
        last_end[0] = time.time()
        return out

    return step
