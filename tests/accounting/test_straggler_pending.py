"""The straggler matcher's steps not summed for good (some ranks have not reported them yet):
`totals` adds them on a copy by the numpy block pass at many ranks, bit for bit what adding
them step by step gives (`sum_steps`), with ties, late ranks and a rank that moves up."""

from __future__ import annotations

import random
from typing import Any

import pytest

from mlgoodput.accounting import _straggler_match as match


def _feed(rng: random.Random, ranks: int) -> match.StepMatcher:
    m = match.StepMatcher({r: [0.0] for r in range(ranks)}, list(range(ranks)))
    grid = rng.choice((1e-3, 1e-2))
    done = dict.fromkeys(range(ranks), 0)  # each rank's steps so far
    for _ in range(rng.randrange(1, 6)):
        new: dict[int, list[tuple[float, int]]] = {}
        for r in range(ranks):
            k = rng.randrange(0, 4)  # some ranks fall behind, some catch up
            pairs = []
            for s in range(done[r], done[r] + k):
                late = rng.choice((0.0, grid, 2 * grid, round(rng.random() / 50 / grid) * grid))
                pairs.append((1.0 + s * 0.1 + late, s))
            done[r] += k
            if pairs:
                new[r] = pairs
        assert m.add(new)
    return m


def _bits(got: tuple[Any, ...]) -> str:
    def h(v: Any) -> Any:
        if isinstance(v, float):
            return v.hex()
        if hasattr(v, "tolist"):
            return h(v.tolist())
        if isinstance(v, list | tuple):
            return [h(x) for x in v]
        if hasattr(v, "__len__") and not isinstance(v, str):
            return [h(x) for x in v]
        return v

    return repr(h(list(got)))


@pytest.mark.parametrize("seed", range(20))
def test_pending_steps_summed_on_a_copy_equal_step_by_step(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    ranks = rng.choice((9, 12, 33, 64))
    m = _feed(rng, ranks)
    order = rng.sample(range(ranks), ranks) if seed % 2 else list(range(ranks))
    before = _bits((m.compared, m.max_spread, m.min_ranks, m.lag, m.lag_n, m.last_steps, m.held, m.late, m.pooled))
    fast = m.totals(order)
    assert (
        _bits((m.compared, m.max_spread, m.min_ranks, m.lag, m.lag_n, m.last_steps, m.held, m.late, m.pooled)) == before
    )
    monkeypatch.setattr(match.StepMatcher, "_summed_copy", lambda self: None)
    slow = m.totals(order)
    assert _bits(fast) == _bits(slow)


def test_pending_steps_take_the_copy_at_many_ranks(monkeypatch: pytest.MonkeyPatch) -> None:
    m = match.StepMatcher({r: [0.0] for r in range(16)}, list(range(16)))
    assert m.add({r: [(1.0 + r * 1e-3, 0)] for r in range(15)})  # rank 15 has not reported step 0
    calls: list[object] = []
    real = match.StepMatcher._summed_copy

    def counting(self: match.StepMatcher) -> match.StepMatcher | None:
        got = real(self)
        calls.append(got)
        return got

    monkeypatch.setattr(match.StepMatcher, "_summed_copy", counting)
    compared = m.totals(list(range(16)))[0]
    assert compared == 1 and len(calls) == 1 and calls[0] is not None
