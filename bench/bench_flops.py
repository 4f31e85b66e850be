"""What `mlgoodput.jax.track_step_flops` adds to each call of a jitted step (CPU).

The step takes a parameter tree of `--leaves` arrays and a batch. The wrapper is timed around
a stand-in for the jitted function that does no work (it has jit's `_cache_size` and
`lower(...).compile().cost_analysis()`, and holds one executable per batch shape), so the
figure is the wrapper's own cost, not jit's dispatch, which varies by more than that on a
shared machine; the wrapper is in three states:
  - one shape: the function holds one executable (one integer comparison per call);
  - two shapes, the batch alternating between them: each call looks its batch's shape up
    and records the change;
  - two shapes, the same shape every call: the lookup, with no record to make;
  - one shape through the wrapper, and another compiled by a call around it: the wrapper
    cannot tell which arguments matter, and reduces all of them (the parameter tree too).
Then the same three around the real jitted function, beside the bare call (noisy).
The best of several rounds is reported.
Usage: PYTHONPATH=src python bench/bench_flops.py [--n N] [--rounds R] [--leaves L]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def _best(fn: Callable[[], None], n: int, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best


class _Compiled:
    def __init__(self, flops: float) -> None:
        self.flops = flops

    def compile(self) -> _Compiled:
        return self

    def cost_analysis(self) -> dict[str, float]:
        return {"flops": self.flops}


class _StandIn:
    """Looks like a `jax.jit` function to the wrapper, and does nothing when called."""

    def __init__(self) -> None:
        self.shapes: set[tuple[int, ...]] = set()

    def __call__(self, ps: Any, x: Any) -> None:
        self.shapes.add(x.shape)

    def _cache_size(self) -> int:
        return len(self.shapes)

    def lower(self, ps: Any, x: Any) -> _Compiled:
        return _Compiled(float(x.shape[0]))


class _NullRecorder:
    """Takes the records, so only the wrapper is timed (not a journal)."""

    def __init__(self) -> None:
        self.records = 0

    def record_step_flops(self, flops: float, *, effective_time: float | None = None) -> None:
        self.records += 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=2000, help="calls per timing round")
    ap.add_argument("--rounds", type=int, default=7, help="timing rounds per case")
    ap.add_argument("--leaves", type=int, default=200, help="arrays in the parameter tree")
    args, _ = ap.parse_known_args(argv)

    import jax
    import jax.numpy as jnp

    import mlgoodput.jax as jm
    from mlgoodput import flops

    def step_py(ps: Any, x: Any) -> Any:
        s = x.sum()
        return {k: v + s for k, v in ps.items()}

    step = jax.jit(step_py)

    ps = {f"p{i}": jnp.zeros((4,)) for i in range(args.leaves)}
    full, part = jnp.ones((64, 8)), jnp.ones((16, 8))
    n = args.n
    print(
        f"per-shape counts: full {flops.jax_step_flops(step, ps, full):.4g}, partial {flops.jax_step_flops(step, ps, part):.4g}"
    )

    def calls(f: Callable[..., Any], batches: list[Any]) -> Callable[[], None]:
        def run() -> None:
            out = None
            for i in range(n):
                out = f(ps, batches[i % len(batches)])
            if out is not None:
                jax.block_until_ready(out)

        return run

    rec = _NullRecorder()
    for label in ("stand-in", "jitted"):

        def fresh(label: str = label) -> Any:
            return _StandIn() if label == "stand-in" else jax.jit(step_py)  # its own cache

        f1 = fresh()
        one = jm.track_step_flops(f1, recorder=rec)
        f2 = fresh()
        two = jm.track_step_flops(f2, recorder=rec)
        two(ps, part)
        f3 = fresh()
        f3(ps, part)  # an executable the wrapper never sees compiled
        around = jm.track_step_flops(f3, recorder=rec)
        cases: list[tuple[str, Callable[[], None], Callable[[], None]]] = [
            ("one shape", calls(f1, [full]), calls(one, [full])),
            ("two shapes, alternating", calls(f2, [full, part]), calls(two, [full, part])),
            ("two shapes, same each call", calls(f2, [full]), calls(two, [full])),
            ("another compiled around it", calls(f3, [full]), calls(around, [full])),
        ]
        print(f"{label + ':':<30}{'bare us':>10}{'wrapped us':>12}{'added us':>10}")
        for name, bare, wrapped in cases:
            wrapped()  # the first call learns its shape
            b = w = float("inf")
            for _ in range(args.rounds):  # alternate, so a busy moment hits both
                b = min(b, _best(bare, n, 1))
                w = min(w, _best(wrapped, n, 1))
            print(f"  {name:<28}{b * 1e6:>10.2f}{w * 1e6:>12.2f}{(w - b) * 1e6:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
