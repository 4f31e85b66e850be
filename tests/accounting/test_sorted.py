"""The bucketed sorted floats behind the ideal step time agree with a plain sorted list."""

from __future__ import annotations

import random

import pytest

from mlgoodput.accounting._sorted import SortedFloats


@pytest.mark.parametrize("seed", range(3))
def test_agrees_with_a_sorted_list(seed: int) -> None:
    rnd = random.Random(seed)
    ref: list[float] = []
    s = SortedFloats()
    for _ in range(25):
        op = rnd.random()
        if op < 0.3:
            xs = [rnd.choice((0.1, 0.2, rnd.random())) for _ in range(rnd.randint(1, 5000))]
            s.extend(xs)
            ref += xs
        elif op < 0.7:
            for _ in range(rnd.randint(1, 300)):
                x = rnd.random()
                s.add(x)
                ref.append(x)
        elif ref:
            for x in rnd.sample(ref, min(len(ref), rnd.randint(1, 100))):
                s.remove(x)
                ref.remove(x)
        ref.sort()
        assert len(s) == len(ref) and list(s.values()) == ref
        if ref:
            for k in {0, len(ref) - 1, len(ref) // 2, rnd.randrange(len(ref))}:
                assert s.kth(k) == ref[k]
            t = rnd.random()
            above = [x for x in ref if x > t]
            cnt, tot = s.above(t)
            assert cnt == len(above) and tot == pytest.approx(sum(above))
            assert s.total() == pytest.approx(sum(ref))
            sizes, sums = s.bucket_sizes()
            again = SortedFloats.from_sorted(s.values(), sizes, sums)
            assert again.kth(len(ref) // 2) == s.kth(len(ref) // 2) and again.total() == s.total()
    with pytest.raises(ValueError):
        s.remove(2.0)


def test_small_batches_merge_into_their_buckets() -> None:
    rnd = random.Random(3)
    ref = [rnd.random() for _ in range(20000)]
    s = SortedFloats(ref)
    for _ in range(100):  # a few values at a time (a host's new steps): the merging path
        xs = [rnd.choice((0.5, rnd.random(), 2.0, -1.0)) for _ in range(rnd.randint(8, 3000))]
        s.extend(xs)
        ref += xs
    ref.sort()
    assert list(s.values()) == ref and s.total() == pytest.approx(sum(ref))
    assert s.kth(len(ref) // 2) == ref[len(ref) // 2]
