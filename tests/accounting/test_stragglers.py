"""The straggler analysis in the accounting (`GoodputCalculator.stragglers`): kept up to date
from the calculator's per-host step arrays, it gives exactly the full pass (`analyze`, every
float bit for bit) on random timelines stored in random batches, in order and out of it, with
numpy on and off; a window is a fresh pass; its saved answer is used only while nothing new
was stored; `mlgoodput report` reads the store once for it."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlgoodput import cli
from mlgoodput.accounting import GoodputCalculator, StragglerReport
from mlgoodput.accounting import _straggler_match as match
from mlgoodput.accounting import _stragglers as mod
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import open_store


def timeline(rng: random.Random, ranks: int, steps: int, shuffle: bool) -> list[Event]:
    """Ranks stepping with restarts that redo a few steps, step starts stored twice, skipped
    numbers, uneven steps; shuffled: some events arrive late."""
    out: list[Event] = []
    for r in rng.sample(range(ranks), ranks):
        t = 100.0 + rng.random()
        out.append(Event(Kind.JOB_START, t - 1, r))
        n = 0
        for _ in range(steps):
            if rng.random() < 0.02:  # a restart redoes a few steps
                t += rng.random()
                out.append(Event(Kind.JOB_START, t, r))
                n = max(0, n - rng.randrange(4))
                t += 0.01
            if rng.random() < 0.03 and out:  # a step start stored twice
                out.append(out[-1])
            out.append(Event(Kind.STEP_START, t, r, step=n))
            n += 1 if rng.random() > 0.01 else 2
            t += rng.choice((0.1, 0.1, 0.1 + rng.random() / 7, 0.5 * rng.random()))
    out.sort(key=lambda e: (e.time, rng.random()))
    if shuffle:
        for _ in range(len(out) // 50):
            i, j = rng.randrange(len(out)), rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
    return out


def full_pass(events: list[Event], start: float | None = None, end: float | None = None) -> StragglerReport:
    """`analyze` of the events: each rank's distinct step starts, ranks in number order."""
    steps: dict[int, set[tuple[float, int]]] = {}
    js: dict[int, set[float]] = {}
    for e in events:
        if e.kind == Kind.STEP_START:
            steps.setdefault(e.host, set()).add((e.time, e.step or 0))
        elif e.kind == Kind.JOB_START:
            js.setdefault(e.host, set()).add(e.time)
    return mod.analyze({h: sorted(v) for h, v in js.items()}, {h: sorted(steps[h]) for h in sorted(steps)}, start, end)


def bits(rep: StragglerReport) -> str:
    """The report with every float as its hex (equal strings: equal to the bit)."""

    def h(v: object) -> object:
        return v.hex() if isinstance(v, float) else v

    d = rep.to_dict()
    ranks = [[(k, h(v)) for k, v in r.items()] for r in d.pop("ranks")]
    verdict = [(k, h(v)) for k, v in d.pop("verdict").items()]
    return repr(([(k, h(v)) for k, v in d.items()], ranks, verdict))


@pytest.mark.parametrize("seed", range(12))
def test_kept_up_to_date_it_equals_the_full_pass(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    events = timeline(rng, rng.randrange(1, 7), rng.randrange(5, 120), shuffle=seed % 3 == 0)
    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    calc = GoodputCalculator("j", "goodput", store=store, snapshot=False)
    i = seq = 0
    while i < len(events):
        k = rng.randrange(1, 40)
        st.append("goodput", "j", EventBatch(1, seq, events[i : i + k]))
        seq += k
        i += k
        assert bits(calc.stragglers()) == bits(full_pass(events[:i]))
    # a window that leaves steps out: a fresh pass over the steps in it
    times = sorted(e.time for e in events if e.kind == Kind.STEP_START)
    lo, hi = times[len(times) // 4], times[3 * len(times) // 4]
    assert bits(calc.stragglers(lo, hi)) == bits(full_pass(events, lo, hi))
    assert bits(calc.stragglers()) == bits(full_pass(events))  # and back to the whole job
    st.close()


def _rounds(rng: random.Random, ranks: int, rounds: int, per: int) -> Iterator[list[tuple[int, list[Event]]]]:
    """Each round: every rank's page of `per` steps (some ranks late by a round, some rounds
    with a restart of every rank, equal start times across ranks, one slow rank)."""
    step, t = 0, 1000.0
    slow = rng.randrange(ranks)
    late: dict[int, list[Event]] = {}
    for k in range(rounds):
        pages: list[tuple[int, list[Event]]] = []
        restart = k and rng.random() < 0.15
        if restart:
            t += 5.0
            for r in range(ranks):
                pages.append((r, [Event(Kind.JOB_START, t - 1.0, r)]))
            step = max(0, step - rng.randrange(per))
        for r in rng.sample(range(ranks), ranks) if rng.random() < 0.3 else range(ranks):
            evs = []
            for j in range(per):
                dt = 0.0 if rng.random() < 0.2 else rng.choice((1e-4, 3e-3, rng.random() / 50))
                dt += 0.02 if r == slow and rng.random() < 0.5 else 0.0
                evs.append(Event(Kind.STEP_START, t + j * 0.1 + dt, r, step=step + j))
            if not restart and rng.random() < 0.1:  # this rank's page comes a round late
                late.setdefault(r, []).extend(evs)
                continue
            pages.append((r, late.pop(r, []) + evs))
        for r, evs in sorted(late.items()) if k == rounds - 1 else ():
            pages.append((r, evs))
        step += per
        t += per * 0.1
        yield pages


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_lockstep_pages_give_the_full_pass(
    tmp_path: Path, numpy_mode: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many ranks stepping together, each shipping its own page (the monitor's usual input):
    their new steps go through the matcher's numpy pass, bit for bit the full pass."""
    rng = random.Random(seed)
    ranks = rng.randrange(3, 40)
    per = rng.choice((1, 5, 10, 30))
    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    first = [Event(Kind.JOB_START, 990.0, r) for r in range(ranks)]
    st.append("goodput", "j", EventBatch(1, 0, first))
    events = list(first)
    calc = GoodputCalculator("j", "goodput", store=store, snapshot=False)
    fast = []
    real = match.StepMatcher._lockstep

    def counting(self: match.StepMatcher, *args: Any) -> bool:
        got = real(self, *args)
        fast.append(got)
        return got

    monkeypatch.setattr(match.StepMatcher, "_lockstep", counting)
    monkeypatch.setattr(match, "LOCKSTEP_MIN", 1)
    seq = 1
    for pages in _rounds(rng, ranks, rng.randrange(4, 25), per):
        for r, evs in pages:
            st.append("goodput", "j", EventBatch(10 + r, seq, evs))
            seq += len(evs)
            events += evs
        r0 = calc.report()
        assert bits(calc.stragglers(r0.start, None, read=False)) == bits(full_pass(events))
    if numpy_mode == "on":
        assert any(fast)  # the numpy pass took part
    else:
        assert not fast
    st.close()


def test_a_matcher_refuses_what_would_change_the_sums() -> None:
    """A step earlier than a rank's last, or a job start before it, is refused (the analysis
    starts over); what it took until then is what a full pass gives."""
    m = match.StepMatcher({0: [0.0], 1: [0.0]}, [0, 1])
    assert m.add({0: [(1.0, 0), (2.0, 1)], 1: [(1.5, 0), (2.1, 1)]})
    assert not m.add({0: [(0.5, 5)]})  # before rank 0's last step
    m = match.StepMatcher({0: [0.0]}, [0, 1])
    assert m.add({0: [(1.0, 0)], 1: [(1.2, 0)]})
    assert not m.job_start(0, 0.9)  # a restart before a step already matched
    assert m.job_start(0, 1.1)


def test_saved_analysis_is_used_only_while_nothing_new_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "always")  # saved whatever the job's size
    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    events = timeline(random.Random(5), 3, 50, shuffle=False)
    st.append("goodput", "j", EventBatch(1, 0, events))
    calc = GoodputCalculator("j", "goodput", store=store)
    calc.report()  # saves the accounting state; the analysis is saved beside it
    first = calc.stragglers()
    assert bits(first) == bits(full_pass(events)) and first.steps_compared > 0
    key = mod.state_key("goodput", "j")
    assert st.load_state(mod.STATE_NAMESPACE, key) is not None  # type: ignore[attr-defined]
    made = []
    real = mod.HostStragglers.report

    def counting(self: mod.HostStragglers, *a: Any, **k: Any) -> StragglerReport:
        made.append(a[2:])
        return real(self, *a, **k)

    monkeypatch.setattr(mod.HostStragglers, "report", counting)
    again = GoodputCalculator("j", "goodput", store=store)
    assert again.stragglers() == first and not made  # from the saved analysis
    assert GoodputCalculator("j", "goodput", store=store).stragglers(0.0, 1e12) == first and not made
    late = max(e.time for e in events) + 1
    st.append("goodput", "j", EventBatch(2, 0, [Event(Kind.STEP_START, late, 0, step=999)]))
    newer = GoodputCalculator("j", "goodput", store=store).stragglers()
    assert len(made) == 1 and bits(newer) == bits(full_pass([*events, Event(Kind.STEP_START, late, 0, step=999)]))
    # a damaged saved analysis is recomputed, never used
    calc = GoodputCalculator("j", "goodput", store=store)
    calc.report()
    st.save_state(mod.STATE_NAMESPACE, key, [b'{"magic": "mlgoodput-stragglers", "cursor": "x"'])  # type: ignore[attr-defined]
    assert GoodputCalculator("j", "goodput", store=store).stragglers() == newer and len(made) == 2
    st.close()


def test_small_jobs_and_snapshot_off_save_no_analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    st.append("goodput", "j", EventBatch(1, 0, timeline(random.Random(3), 3, 30, shuffle=False)))
    for env in ("", "0"):
        monkeypatch.setenv("MLGOODPUT_SNAPSHOT", env)
        calc = GoodputCalculator("j", "goodput", store=store)
        calc.report()
        assert calc.stragglers().steps_compared > 0
        assert st.load_state(mod.STATE_NAMESPACE, mod.state_key("goodput", "j")) is None  # type: ignore[attr-defined]
    st.close()


def test_report_reads_the_store_once_for_a_job_of_several_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from mlgoodput.store import SQLiteStore

    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "0")
    events = timeline(random.Random(7), 4, 60, shuffle=False)
    path = tmp_path / "s.db"
    st = open_store(f"sqlite://{path}")
    st.append("goodput", "j", EventBatch(1, 0, events))
    st.close()
    reads = []
    for name in ("read", "scan_pages"):  # (scan goes through scan_pages)
        real = getattr(SQLiteStore, name)

        def counted(self: Any, *a: Any, _real: Any = real, _name: str = name, **kw: Any) -> Any:
            reads.append(_name)
            return _real(self, *a, **kw)

        monkeypatch.setattr(SQLiteStore, name, counted)
    assert cli.main(["report", "--job", "j", "--store", str(path), "--json"]) == 0
    got = json.loads(capsys.readouterr().out)["stragglers"]
    assert len(reads) == 1, reads
    assert got == json.loads(json.dumps(full_pass(events).to_dict()))


@pytest.mark.parametrize("seed", range(8))
def test_ranks_stepping_together_are_summed_in_place_bit_for_bit(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranks that stepped through the same steps (their numbers stored alike: one column
    shared) are summed from their own step arrays a block of steps at a time, with no copy of
    them: bit for bit the full pass, ties at the latest start included, with an odd and an
    even count of ranks (the median's two cases), a first report and its growth."""
    rng = random.Random(seed)
    ranks = rng.choice((2, 3, 4, 7, 16, 33))
    steps = rng.randrange(40, 400)
    grid = rng.choice((1e-3, 5e-3, 1e-2))  # starts on a grid: equal starts, ties at the latest
    evs = [Event(Kind.JOB_START, 990.0, r) for r in range(ranks)]
    for r in range(ranks):
        for k in range(steps):
            late = rng.choice((0.0, 0.0, grid, 2 * grid, rng.random() / 50))  # (under a step)
            t = 1000.0 + k * 0.1 + round((late + (0.03 if r == seed % ranks and k % 3 else 0.0)) / grid) * grid
            evs.append(Event(Kind.STEP_START, t, r, step=k))
    aligned: list[bool] = []
    real = match.StepMatcher._aligned

    def counting(self: match.StepMatcher, *a: Any) -> bool:
        got = real(self, *a)
        aligned.append(got)
        return got

    monkeypatch.setattr(match.StepMatcher, "_aligned", counting)
    monkeypatch.setattr(match, "_CELLS", rng.choice((1, 64, 1000)))  # several blocks
    monkeypatch.setattr(match, "LOCKSTEP_MIN", 1)
    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    half = [e for e in evs if e.kind != Kind.STEP_START or (e.step or 0) < steps // 2]
    st.append("goodput", "j", EventBatch(1, 0, half))
    calc = GoodputCalculator("j", "goodput", store=store, snapshot=False)
    assert bits(calc.stragglers()) == bits(full_pass(half))
    rest = [e for e in evs if e.kind == Kind.STEP_START and (e.step or 0) >= steps // 2]
    st.append("goodput", "j", EventBatch(1, len(half), rest))
    assert bits(calc.stragglers()) == bits(full_pass(evs))
    assert aligned == [True, True]
    st.close()


def test_lateness_bins_by_table_are_bisect_right() -> None:
    """The lateness histogram's bins, looked up by a double's top bits, are `bisect_right`
    on the grid for every edge, its neighbours, zero, subnormals, huge values and infinity."""
    np = pytest.importorskip("numpy")
    from bisect import bisect_right

    from mlgoodput.accounting import _straggler_rule as rule

    edges = np.asarray(rule.EDGES)
    rng = np.random.default_rng(0)
    vals = np.concatenate(
        [
            edges,
            np.nextafter(edges, 0),
            np.nextafter(edges, np.inf),
            np.abs(rng.standard_normal(20_000)) * 10.0 ** rng.integers(-12, 8, 20_000),
            [0.0, 5e-324, 1e-310, 1e300, np.inf],
        ]
    )
    assert rule._bins(np, vals).tolist() == [bisect_right(rule.EDGES, float(v)) for v in vals]


@pytest.mark.parametrize("ranks", [2, 3, 4, 9, 16])
def test_lateness_counts_of_a_block_are_count_late(ranks: int) -> None:
    """The numpy counts of a block of steps every rank reported (late starts by rank and bin,
    every lateness by bin) are those of `count_late`, step by step: starts on a grid (equal
    starts, zero lateness), spread over many bins, and starts around 0 (counted the other
    way: the sign of a negated lateness no longer says late)."""
    np = pytest.importorskip("numpy")
    from mlgoodput.accounting import _straggler_rule as rule

    rng = np.random.default_rng(ranks)
    for base, grid in ((1.7e9, 1e-3), (1.7e9, 0.0), (-5.0, 0.0)):
        blk = base + np.arange(300)[None, :] * 0.1 + rng.exponential(0.01, (ranks, 300)) * 10.0 ** rng.integers(-4, 2)
        if grid:
            blk = np.round(blk / grid) * grid
        late = np.zeros((ranks, rule.BINS), dtype=np.int64)
        pooled = np.zeros(rule.BINS, dtype=np.int64)
        rule.count_late_full(np, blk, np.sort(blk.T, axis=1), late, pooled)
        want_late = [[0] * rule.BINS for _ in range(ranks)]
        want_pooled = [0] * rule.BINS
        for c in range(blk.shape[1]):
            order = sorted(((r, float(blk[r, c])) for r in range(ranks)), key=lambda p: (p[1], p[0]))
            rule.count_late(order, want_late, want_pooled)
        assert late.tolist() == want_late and pooled.tolist() == want_pooled


@pytest.mark.parametrize("steps", [1, 2, 5])
def test_lateness_counts_of_a_few_steps_of_many_ranks_are_count_late(steps: int) -> None:
    """An upload's block (a few steps of many ranks) is counted only in the cells its starts
    meet, not over every rank's bins: the same counts as `count_late`, step by step, added to
    counts already there, with every rank present (both signs of start) and with ranks missing."""
    np = pytest.importorskip("numpy")
    from mlgoodput.accounting import _straggler_rule as rule

    ranks = 300
    rng = np.random.default_rng(steps)
    for base, missing in ((1.7e9, False), (-5.0, False), (1.7e9, True)):
        blk = (
            base + np.arange(steps)[None, :] * 5.0 + rng.exponential(0.01, (ranks, steps)) * 10.0 ** rng.integers(-4, 2)
        )
        blk[rng.integers(0, ranks, 7), :] += 0.5  # a few ranks well behind
        present = rng.random((ranks, steps)) > 0.1 if missing else np.ones((ranks, steps), dtype=bool)
        present[:2, :] = True  # (two or more ranks each step)
        assert rule._sparse(int(present.sum()), ranks * rule.BINS)  # the path under test
        late = rng.integers(0, 3, (ranks, rule.BINS)).astype(np.int64)
        pooled = rng.integers(0, 3, rule.BINS).astype(np.int64)
        want_late, want_pooled = late.tolist(), pooled.tolist()
        before = int(late.sum())
        if missing:
            rule.count_late_block(np, blk, present, late, pooled)
        else:
            rule.count_late_full(np, blk, np.sort(blk.T, axis=1), late, pooled)
        for c in range(steps):
            order = sorted(((r, float(blk[r, c])) for r in range(ranks) if present[r, c]), key=lambda p: (p[1], p[0]))
            rule.count_late(order, want_late, want_pooled)
        assert late.tolist() == want_late and pooled.tolist() == want_pooled
        assert int(late.sum()) > before  # (late starts were counted)


def test_steps_appended_only_spare_the_checks_and_anything_else_makes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job of 12 ranks stepping together, read round after round: while only steps come
    after each rank's last, the analysis takes them without checking versions and job starts
    again (the timeline's `reshapes` unchanged); a restart (alone, or with steps redone), a
    late step or a new rank changes that, and every round's analysis is the full pass's, to
    the bit."""
    pytest.importorskip("numpy")  # (the stored pages of many ranks are read as one block with numpy only)
    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    ranks = 12
    events = [Event(Kind.JOB_START, 990.0, r) for r in range(ranks)]
    st.append("goodput", "j", EventBatch(1, 0, events))
    calc = GoodputCalculator("j", "goodput", store=store, snapshot=False)
    quiet: list[bool] = []
    real = mod.HostStragglers._extend

    def seen(self: mod.HostStragglers, *a: Any) -> bool:
        quiet.append(bool(a[3]) if len(a) > 3 else False)
        return real(self, *a)

    monkeypatch.setattr(mod.HostStragglers, "_extend", seen)
    seq = {r: 0 for r in range(ranks + 1)}
    step, t = 0, 1000.0
    for k in range(10):
        batch: list[tuple[int, list[Event]]] = []
        if k == 4:  # rank 3 restarts, its steps go on from its last
            batch.append((3, [Event(Kind.JOB_START, t - 0.05, 3)]))
        if k == 5:  # rank 3 restarts and redoes two steps
            batch.append((3, [Event(Kind.JOB_START, t - 0.05, 3)]))
        if k == 6:  # a late step of rank 5, before its last
            batch.append((5, [Event(Kind.STEP_START, t - 3.05, 5, step=10**6)]))
        n = ranks + (k >= 8)  # a new rank from round 8 on
        for r in range(n):
            first = step - 2 if (k == 5 and r == 3) else step
            batch.append(
                (
                    r,
                    [
                        Event(Kind.STEP_START, t + j * 0.1 + r * 1e-3, r, step=first + j)
                        for j in range(step + 3 - first)
                    ],
                )
            )
        for r, evs in batch:
            st.append("goodput", "j", EventBatch(10 + r, seq[r], evs))
            seq[r] += len(evs)
            events += evs
        step += 3
        t += 0.3
        rep = calc.report()
        assert bits(calc.stragglers(rep.start, None, read=False)) == bits(full_pass(events)), k
        if k in (2, 7):  # a window in between: a fresh pass, and the whole job's after it as before
            lo, hi = 1000.0 + k * 0.3 - 1.0, 1000.0 + k * 0.3 - 0.2
            assert bits(calc.stragglers(lo, hi, read=False)) == bits(full_pass(events, lo, hi)), k
    st.close()
    assert quiet.count(True) >= 4  # (rounds with only steps appended)
    assert False in quiet[1:]  # (the restart, the late step, the new rank: checked)
