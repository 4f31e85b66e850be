"""A run of stored step rows of many hosts is ingested as one block (`_ingest_block`: the
columns joined once, each host appended with a few C-level calls, the straggler analysis fed
one block). That must leave exactly what ingesting the run part by part leaves: the timeline
(times, step numbers as runs, flags), the reports, the per-host statistics, the saved state,
the straggler report, with numpy on and off, saved state off and always, and pages that
break the steady shape (a restart or checkpoint among the steps, a host's page stored late,
steps that skip, runs cut short)."""

from __future__ import annotations

import random
from array import array
from pathlib import Path
from typing import Any

import pytest

from mlgoodput.accounting import GoodputCalculator, _fast, _snapshot
from mlgoodput.accounting import _reader as reader_mod
from mlgoodput.accounting._timeline import Timeline
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import open_store
from mlgoodput.torch import stragglers


def _job(rng: random.Random, hosts: int, rounds: int, mix: str) -> list[list[list[Event]]]:
    """Reads of a job's rows (each a list of batches), one row per host per second."""
    reads: list[list[list[Event]]] = [[[Event(Kind.JOB_START, 10.0, h)] for h in range(hosts)]]
    late: list[list[Event]] = []
    step = 0
    for r in range(rounds):
        batches: list[list[Event]] = []
        for _ in range(rng.randrange(1, 4)):
            t = 20.0 + r * 40 + step * 0.1
            order = list(range(hosts))
            rng.shuffle(order)
            for h in order:
                per = 10
                base = step
                if mix == "gap" and rng.random() < 0.1:
                    base = step + 3  # step numbers that skip
                if mix == "gap" and rng.random() < 0.05:
                    base = 0  # numbers that start again (not monotonic)
                evs = [Event(Kind.STEP_START, t + 0.1 * j + 1e-4 * h, h, step=base + j) for j in range(per)]
                if mix == "late" and rng.random() < 0.03:
                    late.append(evs)  # stored later: before the host's last step by then
                    continue
                batches.append(evs)
            if mix == "mixed" and rng.random() < 0.5:  # a restart or a checkpoint among the step rows
                at = rng.randrange(len(batches) + 1)
                h = rng.randrange(hosts)
                if rng.random() < 0.5:
                    batches.insert(at, [Event(Kind.JOB_START, t + 0.05, h)])
                else:
                    batches.insert(at, [Event(Kind.CKPT_SAVE, t + 0.05, h, step=step, value=0.5)])
            if mix == "late" and late and rng.random() < 0.5:
                batches.insert(rng.randrange(len(batches) + 1), late.pop(0))
            if mix == "late" and rng.random() < 0.1 and len(batches) > 2:  # one host's two rows swapped
                i = rng.randrange(len(batches) - 1)
                batches[i], batches[i + 1] = batches[i + 1], batches[i]
            step += 10
        reads.append(batches)
    if late:
        reads.append(late)
    return reads


def _state(calc: GoodputCalculator) -> Any:
    tl = calc.timeline
    hosts = [
        (h, log.times.tobytes(), [a.tobytes() for a in log.nums.state()], len(log.nums), log.others, log.version)
        for h, log in tl.hosts.items()
    ]
    flags = [(log.job_starts, log.monotonic) for log in tl.hosts.values()]
    return hosts, flags, tl.events, repr(tl.max_time), repr(tl.earliest_change), calc._cursor


def _dumped(calc: GoodputCalculator) -> list[bytes]:
    return list(_snapshot.dump(calc._engine, url="memory://x", namespace="goodput", job="j", cursor=calc._cursor))


@pytest.mark.slow
@pytest.mark.parametrize("snapshot", ["0", "always"])
@pytest.mark.parametrize("mix", ["steady", "mixed", "late", "gap", "cut"])
@pytest.mark.parametrize("seed", range(2))
def test_a_block_ingests_what_parts_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, numpy_mode: str, snapshot: str, mix: str, seed: int
) -> None:
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", snapshot)
    rng = random.Random(seed * 31 + len(mix))
    hosts = rng.choice((9, 16, 40))
    reads = _job(rng, hosts, 6, "steady" if mix == "cut" else mix)
    kinds = ("block", "plain")
    urls = {k: f"sqlite://{tmp_path}/{k}.db" for k in kinds}
    stores = {k: open_store(u) for k, u in urls.items()}
    calcs = {k: GoodputCalculator("j", "goodput", store=urls[k], clock=lambda: 1e5) for k in kinds}
    blocks: list[int] = []
    real = Timeline.ingest_step_block

    def counted(self: Timeline, hosts: list[int], *a: Any) -> Any:
        blocks.append(len(hosts))
        return real(self, hosts, *a)

    monkeypatch.setattr(Timeline, "ingest_step_block", counted)
    seq = 0
    for batches in reads:
        for evs in batches:
            for st in stores.values():
                st.append("goodput", "j", EventBatch(1 + evs[0].host, seq, evs))
            seq += len(evs)
        got = {}
        for k in kinds:
            with monkeypatch.context() as m:
                if mix == "cut":
                    m.setattr(reader_mod, "_RUN_EVENTS", 137)  # runs cut inside pages
                if k == "plain":
                    m.setattr(reader_mod, "_BLOCK_HOSTS", 1 << 30)
                got[k] = (
                    calcs[k].report(),
                    calcs[k]._engine.host_stats(1e5),
                    calcs[k].stragglers(read=False),
                )
        assert got["block"] == got["plain"]
        assert _state(calcs["block"]) == _state(calcs["plain"])
        assert _dumped(calcs["block"]) == _dumped(calcs["plain"])
        assert got["plain"][2] == stragglers("j", store=urls["plain"])  # a calculator that read it all at once
    if numpy_mode == "on":
        assert blocks, "the block path ran"
        if mix == "steady":
            assert max(blocks) == hosts
    else:
        assert not blocks
    if snapshot == "always":  # what each saved: a calculator started from it reads the same
        again = {k: GoodputCalculator("j", "goodput", store=urls[k], clock=lambda: 1e5) for k in kinds}
        assert again["block"].report() == again["plain"].report() == got["plain"][0]
        assert _state(again["block"]) == _state(again["plain"])
    for st in stores.values():
        st.close()


def test_step_blocks_says_what_the_checks_of_each_part_say() -> None:
    """`_fast.step_blocks` over parts joined: what `_increasing` and `counts_up` say of each."""
    pytest.importorskip("numpy")
    from mlgoodput.accounting._reader import _increasing
    from mlgoodput.accounting._stepnums import counts_up

    big = 2**63 - 1
    parts = [
        ([1.0, 2.0, 3.0], [0, 1, 2]),
        ([4.0], [-1]),  # a negative first number
        ([5.0, 6.0], [big, -(2**63)]),  # wraps around in int64
        ([7.0, 8.0], [5, 7]),  # skips
        ([9.0], [3]),
        ([-0.0, 0.5], [2**62, 2**62 + 1]),
        ([10.0, 11.0, 12.0], [9, 8, 9]),
        ([float("nan")], [0]),  # alone: increasing, as `_increasing` says
        ([20.0, 21.0], [big - 1, big]),
    ]
    times = b"".join(array("d", t).tobytes() for t, _ in parts)
    steps = b"".join(array("q", s).tobytes() for _, s in parts)
    got = _fast.step_blocks(times, steps, [len(t) for t, _ in parts])
    assert got is not None
    ok, first_t, last_t, first_s, counted = got
    assert ok
    assert [repr(x) for x in first_t] == [repr(t[0]) for t, _ in parts]
    assert [repr(x) for x in last_t] == [repr(t[-1]) for t, _ in parts]
    assert first_s == [s[0] for _, s in parts]
    assert counted == [counts_up(array("q", s)) for _, s in parts]
    assert all(_increasing(array("d", t)) for t, _ in parts)
    for bad in ([1.0, 1.0], [2.0, 1.0], [1.0, float("nan")]):
        t2 = times + array("d", bad).tobytes()
        s2 = steps + array("q", [0, 1]).tobytes()
        got = _fast.step_blocks(t2, s2, [len(t) for t, _ in parts] + [2])
        assert got is not None and not got[0]


def test_extend_run_is_extend_of_a_run() -> None:
    """`StepNums.extend_run` leaves what `extend` of the same numbers leaves, and returns the
    last number before them."""
    from mlgoodput.accounting._stepnums import StepNums

    rng = random.Random(3)
    a, b = StepNums(), StepNums()
    for _ in range(300):
        m = rng.randrange(1, 80)
        last = a.last()
        if rng.random() < 0.3:  # numbers that do not count up: packed segments between runs
            xs = [rng.randrange(0, 50) for _ in range(m)]
            a.extend(xs)
            b.extend(xs)
            continue
        first = last + 1 if last is not None and last >= 0 and rng.random() < 0.6 else rng.randrange(0, 1000)
        assert b.extend_run(first, m) == last
        a.extend(range(first, first + m))
        assert [x.tobytes() for x in a.state()] == [x.tobytes() for x in b.state()]
        assert len(a) == len(b) and a.last() == b.last()


def _timeline_state(tl: Timeline) -> Any:
    """Everything ingesting steps changes, floats as their reprs."""
    hosts = [
        (h, log.times.tobytes(), [a.tobytes() for a in log.nums.state()], log.monotonic, repr(log.changed_from))
        for h, log in tl.hosts.items()
    ]
    return hosts, tl.events, repr(tl.max_time), repr(tl.earliest_change)


@pytest.mark.parametrize("case", ["appends", "backwards", "new host", "behind"])
def test_step_block_leaves_what_part_by_part_leaves(case: str) -> None:
    """`Timeline.ingest_step_block` (its column-at-a-time path when every part appends after
    its host's last step, its part-by-part loop otherwise) leaves what `ingest_steps` part by
    part leaves, the earliest change and each host's change included (the block's checks use
    numpy, which the test install has: no run without it)."""
    from mlgoodput.store import Columns

    rng = random.Random(len(case))
    hosts = list(range(24))
    tls = Timeline(), Timeline()
    for tl in tls:  # earlier steps of every host, and a change taken since
        for h in hosts:
            t = array("d", [100.0 + k + h * 1e-3 for k in range(50)])
            tl.ingest_steps(Columns.from_events([Event(Kind.STEP_START, x, h, step=k) for k, x in enumerate(t)]))
            tl.hosts[h].take_change()
        tl.earliest_change = float("inf")
    order = hosts[:]
    rng.shuffle(order)
    if case == "new host":
        order.append(99)
    sizes, times, steps = [], array("d"), array("q")
    for i, h in enumerate(order):
        k = rng.randrange(1, 4)
        first = 50 if case != "backwards" or i % 5 else 7  # numbers below the host's last
        t0 = 160.0 + h * 1e-3 + rng.random() * 0.1
        if case == "behind" and i == 3:
            t0 = 120.5  # before the host's last step: spliced in
        times.extend(t0 + j for j in range(k))
        steps.extend(range(first, first + k))
        sizes.append(k)
    got = _fast.step_blocks(times.tobytes(), steps.tobytes(), sizes)
    assert got is not None and got[0]
    tls[0].ingest_step_block(order, sizes, times.tobytes(), steps.tobytes(), got[1:])
    at = 0
    for h, k in zip(order, sizes, strict=True):
        evs = [Event(Kind.STEP_START, times[at + j], h, step=steps[at + j]) for j in range(k)]
        tls[1].ingest_steps(Columns.from_events(evs))
        at += k
    assert _timeline_state(tls[0]) == _timeline_state(tls[1])
    assert tls[0].earliest_change < float("inf")


def _lead_by_loop(tl: Timeline, q: float) -> int | None:
    """The lowest host with a job start at or before q (the plain reading of lead_host)."""
    got = [h for h, log in tl.hosts.items() if log.job_starts and log.job_starts[0] <= q]
    return min(got) if got else None


@pytest.mark.parametrize("seed", range(10))
def test_lead_host_is_the_lowest_host_started_by_q(seed: int) -> None:
    """lead_host reads the hosts a column at a time: the lowest process index with a job start
    at or before q, hosts without one passed over, in any order the hosts came in."""
    rnd = random.Random(seed)
    tl = Timeline()
    hosts = rnd.sample(range(200), rnd.randint(1, 40))
    for h in hosts:
        log = tl.host(h)
        if rnd.random() < 0.8:
            log.job_starts.extend(sorted(rnd.uniform(0, 100) for _ in range(rnd.randint(1, 3))))
    for q in [-1.0, 0.0, *sorted(rnd.uniform(0, 110) for _ in range(8)), 1e9]:
        tl.events += 1  # (no answer kept from the last question)
        assert tl.lead_host(q) == _lead_by_loop(tl, q)
