"""Step numbers kept as runs read exactly like the plain array they replace."""

from __future__ import annotations

import random
from array import array
from bisect import bisect_left

import pytest

from mlgoodput.accounting._stepnums import StepNums, counts_up


def _numbers(rnd: random.Random, n: int) -> list[int]:
    out: list[int] = []
    k = rnd.randint(0, 10**9) if rnd.random() < 0.2 else 0
    while len(out) < n:
        r = rnd.random()
        if r < 0.05:
            k = max(0, k - rnd.randint(0, 50))  # a restart
        elif r < 0.08:
            k += rnd.randint(2, 9)  # a skip
        elif r < 0.1:
            pass  # a repeat
        out.append(k)
        if r >= 0.1:
            k += 1
    return out


@pytest.mark.parametrize("seed", range(20))
def test_runs_read_like_an_array(seed: int) -> None:
    rnd = random.Random(seed)
    want: list[int] = []
    got = StepNums()
    for _ in range(rnd.randint(1, 12)):
        batch = _numbers(rnd, rnd.choice((1, 5, 63, 64, 65, 300, 2000)))
        if rnd.random() < 0.5 and want:
            batch = [want[-1] + 1 + i for i in range(len(batch))]  # continues the last run
        want += batch
        got.extend(array("q", batch) if rnd.random() < 0.5 else batch)
        assert len(got) == len(want)
    assert list(got) == want and got.to_array().tolist() == want
    for _ in range(200):
        i = rnd.randrange(len(want))
        j = rnd.randint(i, len(want))
        assert got[i] == want[i] and got[i - len(want)] == want[i]
        assert got[i:j].tolist() == want[i:j]
    if want == sorted(want):
        for x in rnd.sample(want, min(20, len(want))):
            assert bisect_left(got, x, 0, len(got)) == bisect_left(want, x)
    again = StepNums.from_state(len(got), *got.state())
    assert list(again) == want
    with pytest.raises(IndexError):
        got[len(want)]


def test_a_counting_job_costs_no_bytes_per_step() -> None:
    s = StepNums()
    for k in range(0, 1_000_000, 65536):
        s.extend(array("q", range(k, min(k + 65536, 1_000_000))))
    s.extend(range(500, 600))  # a restart: one more run
    assert len(s) == 1_000_100 and s.nbytes() == 32
    assert s[999_999] == 999_999 and s[1_000_000] == 500


def test_counts_up() -> None:
    assert counts_up(array("q", [5, 6, 7])) and counts_up(array("q"))
    assert not counts_up(array("q", [5, 7, 7])) and not counts_up(array("q", [0, 0, 3, 3][:3]))
    assert not counts_up(array("q", [-1, 0, 1]))
    assert counts_up(array("q", range(2**40, 2**40 + 70000)))


@pytest.mark.parametrize("seed", range(20))
def test_extend_checked_equals_extend(seed: int) -> None:
    """A caller's int64 check (`by_one`, as `_fast.by_one_each` gives it: wrapped differences
    pass) plus the first and last checked inside give what `extend` gives; `last` is [-1]."""
    rnd = random.Random(seed)
    plain, checked = StepNums(), StepNums()
    assert plain.last() is None
    for _ in range(rnd.randint(1, 15)):
        k = rnd.random()
        if k < 0.1:  # counts up by one through the int64 wrap: each difference is 1 in int64
            batch = array("q", [2**63 - 2, 2**63 - 1, -(2**63), -(2**63) + 1])
        elif k < 0.2:
            batch = array("q", range(-3, rnd.randint(-2, 5)))  # negative numbers do not count up
        else:
            batch = array("q", _numbers(rnd, rnd.choice((1, 5, 64, 65, 300))))
        diffs = [(batch[i + 1] - batch[i] + 2**63) % 2**64 - 2**63 for i in range(len(batch) - 1)]
        by_one = all(d == 1 for d in diffs)
        assert plain.extend(batch) == checked.extend_checked(batch, by_one)
        assert list(plain) == list(checked) and plain.state() == checked.state()
        assert checked.last() == checked[-1]


@pytest.mark.parametrize("seed", range(30))
def test_insert_reads_like_a_list_insert(seed: int) -> None:
    """A late batch put before index i: the runs around it are split, kept as runs, and read
    exactly as the list with the batch inserted there."""
    rnd = random.Random(seed)
    want = _numbers(rnd, rnd.choice((0, 1, 70, 500, 3000)))
    got = StepNums(want)
    for _ in range(rnd.randint(1, 6)):
        batch = _numbers(rnd, rnd.choice((1, 2, 64, 200)))
        if rnd.random() < 0.3:
            batch = list(range(batch[0], batch[0] + len(batch)))  # a batch that counts up by one
        i = rnd.choice((0, len(want), rnd.randint(0, len(want))))
        got.insert(i, array("q", batch))
        want[i:i] = batch
        assert len(got) == len(want)
        assert list(got) == want
    assert got.to_array().tolist() == want
    assert list(StepNums.from_state(len(got), *got.state())) == want
    with pytest.raises(IndexError):
        got.insert(len(want) + 1, array("q", [1]))


def test_insert_of_a_counting_batch_keeps_the_job_in_few_runs() -> None:
    s = StepNums(range(1000, 2000))
    s.insert(0, array("q", range(1000)))  # the early part of the job, delivered last
    assert list(s) == list(range(2000))
    assert s.nbytes() <= 3 * 16  # runs, not a packed copy of the numbers


def _hosts_numbers(rnd: random.Random, hosts: int) -> list[StepNums]:
    """Hosts' numbers alike and not: the usual runs from 0, a host with a packed segment, a
    host with a restart, a host behind, an empty one (by the seed)."""
    out = []
    for h in range(hosts):
        s = StepNums()
        kind = rnd.random()
        if kind < 0.05:
            out.append(s)  # no numbers yet
            continue
        if kind < 0.1:
            s.extend(_numbers(rnd, rnd.randint(1, 200)))  # anything, packed segments included
        elif kind < 0.15:
            s.extend(range(50))
            s.extend(range(10, 40))  # a restart: a second run
        else:
            s.extend(range(100 - (h % 2 if kind < 0.2 else 0)))
        out.append(s)
    return out


@pytest.mark.parametrize("seed", range(30))
def test_many_hosts_a_column_at_a_time_equal_one_by_one(seed: int) -> None:
    """lengths, common_run_offset and extend_runs (a column at a time over many hosts) give
    what len, run_offset and extend_run give host by host, and leave the numbers the same."""
    from mlgoodput.accounting._stepnums import common_run_offset, extend_runs, lengths

    rnd = random.Random(seed)
    hosts = rnd.choice((1, 2, 17, 64))
    alike = rnd.random() < 0.5  # every host the usual run: the column-wise paths
    mine = [StepNums(range(100)) for _ in range(hosts)] if alike else _hosts_numbers(rnd, hosts)
    plain = [StepNums.from_state(len(s), *s.state()) for s in mine]  # the same segments
    for _ in range(4):
        assert lengths(mine) == [len(s) for s in plain]
        lo = rnd.choice((0, 1, 50, 99, 100, 10**6))
        offs = [s.run_offset(lo) for s in plain]
        want = offs[0] if offs[0] is not None and offs.count(offs[0]) == len(offs) else None
        assert common_run_offset(mine, lo) == want
        firsts = [(s.last() + 1 if s.last() is not None else 0) for s in plain]
        if rnd.random() < 0.3:
            firsts[rnd.randrange(hosts)] += rnd.choice((-3, 5))  # one host does not go on by one
        sizes = [rnd.choice((1, 2, 7)) for _ in range(hosts)]
        got = extend_runs(mine, [max(0, f) for f in firsts], sizes)
        assert got == [s.extend_run(max(0, f), m) for s, f, m in zip(plain, firsts, sizes, strict=True)]
        assert [list(s) for s in mine] == [list(s) for s in plain]
        assert [s.state() for s in mine] == [s.state() for s in plain]
    assert common_run_offset([], 0) is None


def test_run_extender_gives_what_extend_run_gives_call_after_call() -> None:
    """RunExtender across calls on the same StepNums list: the lasts `extend_run` returns and
    the numbers it leaves, whether the firsts continue every run (its shortcut), skip ahead,
    go back, or the list is another one."""
    from mlgoodput.accounting._stepnums import RunExtender

    rnd = random.Random(3)
    mine = [StepNums(list(range(5 + h))) for h in range(9)]
    plain = [StepNums(list(range(5 + h))) for h in range(9)]
    ext = RunExtender()
    nxt = [len(s) for s in mine]
    shortcuts = 0
    for r in range(40):
        sizes = [rnd.randint(1, 3) for _ in mine]
        firsts = list(nxt)
        if r % 9 == 4:
            firsts[2] += 5  # a skip ahead
        if r % 11 == 7:
            firsts[5] = max(0, firsts[5] - 3)  # numbers going back (a restart)
        lists = mine if r != 20 else list(mine)  # (another list: no shortcut)
        kept = ext._nums is lists and ext._next == firsts
        lasts, on = ext.extend(lists, firsts, sizes)
        want = [s.extend_run(f, m) for s, f, m in zip(plain, firsts, sizes, strict=True)]
        assert lasts == want, r
        assert on == all(w is not None and w + 1 == f for w, f in zip(want, firsts, strict=True)), r
        assert [list(a) for a in mine] == [list(b) for b in plain], r
        shortcuts += kept
        nxt = [f + m for f, m in zip(firsts, sizes, strict=True)]
    assert shortcuts >= 20
