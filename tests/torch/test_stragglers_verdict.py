"""The straggler verdict names a rank only when the data say so (docs/torch.md, "Stragglers").

Seeded random jobs: every rank's step starts jitter (lognormal, 2 to 5 % of a step, and now
and then an OS hiccup of a fifth of a step to two steps). With noise only, no rank may be named
in 19 of 20 jobs; a rank whose start is 20 % of a step late on a random 30 % of its steps must
be named in 19 of 20; with 2 ranks and with 8 hosts. Then the rule's parts on their own: the
evidence it states, the counts of the numpy pass against the plain one, the binomial tail."""

from __future__ import annotations

import bisect
import json
import math
import random
import statistics
from pathlib import Path

import pytest

import mlgoodput.torch as mt
from mlgoodput.accounting import _straggler_rule as rule
from mlgoodput.accounting._stragglers import StragglerReport, analyze
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore, open_store

STEP = 0.1
RUNS = 20


def job(seed: int, ranks: int, steps: int, slow: int | None, *, share: float = 0.3, by: float = 0.2) -> StragglerReport:
    """A job's straggler report: `slow` starts `by` of a step late on a random `share` of its steps."""
    rng = random.Random(seed)
    sigma = rng.uniform(0.02, 0.05)
    starts: dict[int, list[tuple[float, int]]] = {r: [] for r in range(ranks)}
    for n in range(steps):
        for r in range(ranks):
            x = STEP * (rng.lognormvariate(0.0, sigma) - 1.0)
            if rng.random() < 0.01:  # an OS hiccup
                x += STEP * rng.uniform(0.2, 2.0)
            if r == slow and rng.random() < share:
                x += by * STEP
            starts[r].append((1000.0 + n * STEP + x, n))
    return analyze({r: [999.0] for r in range(ranks)}, starts)


@pytest.mark.parametrize(("ranks", "steps"), [(2, 100), (8, 100), (8, 60)])
def test_noise_alone_names_no_straggler(ranks: int, steps: int) -> None:
    named = [rep.straggler for rep in (job(seed, ranks, steps, None) for seed in range(RUNS))]
    assert sum(s is not None for s in named) <= 1, named


@pytest.mark.parametrize(("ranks", "steps"), [(2, 100), (8, 100), (8, 60)])
def test_a_rank_slowed_on_a_third_of_its_steps_is_named(ranks: int, steps: int) -> None:
    reps = [job(100 + seed, ranks, steps, ranks - 1) for seed in range(RUNS)]
    assert sum(rep.straggler == ranks - 1 for rep in reps) >= RUNS - 1, [rep.verdict for rep in reps]
    assert all(rep.straggler in (None, ranks - 1) for rep in reps)  # never the wrong rank


@pytest.mark.parametrize("ranks", [2, 8])
def test_twenty_steps_name_a_rank_late_every_step_and_nothing_else(ranks: int) -> None:
    assert all(job(seed, ranks, 20, ranks - 1, share=1.0).straggler == ranks - 1 for seed in range(RUNS))
    assert sum(job(seed, ranks, 20, None).straggler is not None for seed in range(RUNS)) <= 1


def test_the_verdict_states_its_evidence() -> None:
    """Rank 1 starts 0.1 s late on every third of 60 steps of 1 s, rank 0 on none: 20 late
    steps of 20, where chance gives 10, at the floor (5 % of a step, up the grid: 57.9 ms)."""
    starts = {r: [(100.0 + n + (0.1 if r == 1 and n % 3 == 0 else 0.0), n) for n in range(60)] for r in (0, 1)}
    rep = analyze({0: [99.0], 1: [99.0]}, starts)
    v = rep.verdict
    assert (v.straggler, v.rank, v.late_steps, v.expected_late_steps, v.steps) == (1, 1, 20, 10.0, 60)
    assert v.threshold_s == rule.EDGES[rule._edge_at_least(0.05)] and 0.05 <= v.threshold_s < 0.05 * 2**0.25
    assert v.noise_s == rule.EDGES[0]  # most steps start together: the median lateness is 0
    # 2 ranks x 1 threshold (twice the noise is under the floor) x P(20 of 20 late steps are rank 1's)
    assert v.p_value == pytest.approx(2 * 0.5**20)
    assert rep.straggler_cost_s == pytest.approx(20 * 0.1)
    assert "rank 1 started 20 of 60 steps at least 57.9 ms behind the other ranks (chance gives 10.0" in v.text()
    assert rep.lines()[0].startswith("straggler: rank 1 held the others back 2.00 s over 60 steps: rank 1 started")
    # the same lateness on 4 of 60 steps: chance explains it (p >= 0.01): no straggler, and said why
    few = {r: [(100.0 + n + (0.1 if r == 1 and n % 15 == 0 else 0.0), n) for n in range(60)] for r in (0, 1)}
    rep = analyze({0: [99.0], 1: [99.0]}, few)
    assert rep.straggler is None and rep.verdict.rank == 1 and rep.verdict.late_steps == 4
    assert rep.verdict.p_value == pytest.approx(2 * 0.5**4)
    assert rep.lines()[0].startswith("stragglers: none (within noise: rank 1 started 4 of 60 steps")
    # a lateness under the floor never counts, however steady
    small = {r: [(100.0 + n + (0.04 if r == 1 else 0.0), n) for n in range(60)] for r in (0, 1)}
    v = analyze({0: [99.0], 1: [99.0]}, small).verdict
    assert v.straggler is None and v.rank is None and v.late_steps == 0
    assert v.text() == "no rank started a step late by 57.9 ms or more over 60 steps"


def test_a_steady_excess_too_small_to_matter_is_not_named() -> None:
    """A rank late on 1 step in 25 more than its share over 20,000 steps: significant, yet under
    `MIN_EXCESS_SHARE` of the steps, so not a straggler."""
    late = [[0] * rule.BINS for _ in range(2)]
    at = rule._edge_at_least(0.05) + 1
    late[0][at], late[1][at] = 1000, 1800  # chance gives 1,400: 400 over, p tiny, but 2 % of the steps
    pooled = [0] * rule.BINS
    pooled[at] = 2800
    pooled[0] = 40_000 - 2800
    v = rule.straggler_verdict([0, 1], late, pooled, 20_000, 2, 1.0)
    assert v.rank == 1 and v.late_steps == 1800 and v.p_value < 1e-20 and v.straggler is None
    late[1][at] = 2400  # chance gives 1,700: 700 over, 3.5 % of the steps: still under
    assert rule.straggler_verdict([0, 1], late, pooled, 20_000, 2, 1.0).straggler is None
    late[1][at] = 4000  # chance gives 2,500: 1,500 over, 7.5 % of the steps
    assert rule.straggler_verdict([0, 1], late, pooled, 20_000, 2, 1.0).straggler == 1


def test_steps_of_fewer_ranks_count_with_the_chance_of_the_fewest() -> None:
    """When some compared steps have only 2 of 4 ranks, chance is taken as 1 in 2 (conservative)."""
    starts = {
        r: [(100.0 + n + (0.3 if r == 3 else 0.0), n) for n in range(30) if r in (0, 3) or n >= 5] for r in range(4)
    }
    v = analyze({r: [99.0] for r in range(4)}, starts).verdict
    assert v.straggler == 3 and v.late_steps == 30 and v.expected_late_steps == 15.0


@pytest.mark.parametrize("seed", range(6))
def test_the_numpy_count_equals_the_plain_count(seed: int) -> None:
    np = pytest.importorskip("numpy")
    rng = random.Random(seed)
    ranks, steps = rng.randrange(2, 9), rng.randrange(1, 200)
    vals = [
        [1000 + k * 0.1 + rng.choice((0.0, 0.001, 0.02, rng.random() * 0.05)) for k in range(steps)]
        for _ in range(ranks)
    ]
    present = np.array([[seed % 2 == 0 or rng.random() > 0.3 for _ in range(steps)] for _ in range(ranks)])
    keep = present.sum(axis=0) >= 2
    blk = np.where(present, np.array(vals), np.nan)[:, keep]
    present = present[:, keep]
    late = np.zeros((ranks, rule.BINS), dtype=np.int64)
    pooled = np.zeros(rule.BINS, dtype=np.int64)
    rule.count_late_block(np, blk, present, late, pooled)
    want = {r: [0] * rule.BINS for r in range(ranks)}
    want_pooled = [0] * rule.BINS
    for c in range(blk.shape[1]):
        st = {r: float(blk[r, c]) for r in range(ranks) if present[r, c]}
        rule.count_late(sorted(st.items(), key=lambda kv: (kv[1], kv[0])), want, want_pooled)
    assert late.tolist() == [want[r] for r in range(ranks)]
    assert pooled.tolist() == want_pooled and sum(want_pooled) == int(present.sum())


def test_the_lateness_is_behind_the_median_of_the_others() -> None:
    """Five ranks starting at 0, 1, 2, 3, 10 (ms): each one's lateness is its start minus the
    median of the other four, counted in the bin of its size."""
    order = [(r, t / 1000) for r, t in enumerate((0, 1, 2, 3, 10))]
    late = {r: [0] * rule.BINS for r in range(5)}
    pooled = [0] * rule.BINS
    rule.count_late(order, late, pooled)
    others = {0: 2.5, 1: 2.5, 2: 2.0, 3: 1.5, 4: 1.5}  # (ms) the others' medians
    want_pooled = [0] * rule.BINS
    for r, t in order:
        assert statistics.median(t2 for r2, t2 in order if r2 != r) == pytest.approx(others[r] / 1000)
        x = t - statistics.median(t2 for r2, t2 in order if r2 != r)
        want_pooled[bisect.bisect_right(rule.EDGES, abs(x))] += 1
        assert [i for i, k in enumerate(late[r]) if k] == ([bisect.bisect_right(rule.EDGES, x)] if x > 0 else [])
    assert pooled == want_pooled and sum(late[4]) == sum(late[3]) == 1


@pytest.mark.parametrize(("n", "p"), [(1, 0.5), (10, 0.5), (23, 0.5), (40, 0.125), (300, 0.25)])
def test_binomial_tail_is_exact(n: int, p: float) -> None:
    for k in range(n + 1):
        exact = sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))
        got = rule._binomial_tail(n, k, p)
        if k <= n * p:
            assert got == 1.0
        else:
            assert got == pytest.approx(exact, rel=1e-9, abs=1e-300)


def test_public_names() -> None:
    assert mt.StragglerVerdict is rule.StragglerVerdict
    assert (mt.MIN_LEAD_S, mt.MIN_LEAD_FRACTION) == (rule.MIN_LEAD_S, rule.MIN_LEAD_FRACTION)


def test_a_saved_analysis_without_a_verdict_is_redone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An analysis `mlgoodput report` saved before verdicts carried evidence is not used."""
    from mlgoodput.accounting import GoodputCalculator
    from mlgoodput.accounting import _stragglers as mod

    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "always")
    st = SQLiteStore(tmp_path / "s.db")
    store = st.url
    ev = [Event(Kind.JOB_START, 99.0, r) for r in (0, 1)]
    ev += [Event(Kind.STEP_START, 100.0 + n + (0.3 if r == 1 else 0.0), r, step=n) for n in range(30) for r in (0, 1)]
    st.append("goodput", "j", EventBatch(1, 0, ev))
    calc = GoodputCalculator("j", "goodput", store=store)
    calc.report()  # saves the accounting state, and the analysis beside it
    first = calc.stragglers()
    assert first.straggler == 1
    key = '["goodput", "j"]'
    saved = st.load_state(mod.STATE_NAMESPACE, key)
    assert saved is not None
    doc = json.loads(b"".join(saved))
    del doc["report"]["verdict"]
    doc["report"]["straggler"] = 0  # what an old rule said: never shown now
    st.save_state(mod.STATE_NAMESPACE, key, [json.dumps(doc).encode()])
    assert mt.saved_stragglers("j", "goodput", store=store) == first
    st.close()


def test_the_ui_shows_the_verdict_or_why_there_is_none(tmp_path: Path) -> None:
    from mlgoodput.ui._job import JobView

    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    ev = [Event(Kind.JOB_START, 99.0, r) for r in (0, 1)]
    ev += [
        Event(Kind.STEP_START, 100.0 + n + (0.1 if r == 1 and n % 15 == 0 else 0.0), r, step=n)
        for n in range(60)
        for r in (0, 1)
    ]
    st.append("goodput", "j", EventBatch(1, 0, ev))
    d = JobView(st, "j", "goodput", clock=lambda: 200.0).detail()
    v = d["straggler_verdict"]
    assert d["straggler"] is None and v["straggler"] is None and (v["rank"], v["late_steps"]) == (1, 4)
    assert v["text"].startswith("within noise: rank 1 started 4 of 60 steps")
    rep = analyze(
        {0: [99.0], 1: [99.0]},
        {r: [(e.time, e.step or 0) for e in ev if e.kind == Kind.STEP_START and e.host == r] for r in (0, 1)},
    )
    assert {k: v[k] for k in rep.verdict.__slots__} == rep.verdict.to_dict()  # the one verdict
    st.close()


def test_an_old_ui_save_with_an_analysis_is_read_and_its_analysis_left(tmp_path: Path) -> None:
    """The web UI used to save its own straggler analysis with its series; such a save is still
    read (the rest kept), and the page shows the accounting's analysis, not the saved one."""
    from mlgoodput.ui import _saved
    from mlgoodput.ui._job import JobView

    st = SQLiteStore(tmp_path / "s.db")
    ev = [Event(Kind.JOB_START, 99.0, r) for r in (0, 1)]
    ev += [Event(Kind.STEP_START, 100.0 + n + (0.3 if r == 1 else 0.0), r, step=n) for n in range(30) for r in (0, 1)]
    st.append("goodput", "j", EventBatch(1, 0, ev))
    lag = {"key": [], "hosts": [[0, 0.0, 1, 0.0], [1, 0.2, 9, 1.8]], "compared": 10, "spread_s": 0.2}
    old = {**lag, "straggler": 0, "cost_s": 1.8, "verdict": {"straggler": 0}}  # never shown
    st.save_state(
        _saved.NAMESPACE,
        _saved.key("goodput", "j"),
        [json.dumps({"format": _saved.FORMAT, "hosts": [], "lag": old}).encode()],
    )
    got = _saved.load(st, "goodput", "j")
    assert got is not None and got.hosts == {}
    d = JobView(st, "j", "goodput", clock=lambda: 200.0).detail()
    want = analyze(
        {0: [99.0], 1: [99.0]},
        {r: [(e.time, e.step or 0) for e in ev if e.host == r and e.step is not None] for r in (0, 1)},
    )
    assert d["straggler"] == {"host": 1, "cost_s": want.straggler_cost_s} and want.straggler == 1
    st.close()


def test_the_numpy_bins_are_bisects_bins() -> None:
    """Every edge, its neighbours on either side, 0, the extremes and random sizes."""
    np = pytest.importorskip("numpy")
    rng = random.Random(7)
    vals = [0.0, 5e-324, 1e-300, 9.99e-6, 1e300, math.inf, *rule.EDGES]
    vals += [math.nextafter(e, 0.0) for e in rule.EDGES] + [math.nextafter(e, math.inf) for e in rule.EDGES]
    vals += [rng.random() * 10.0 ** rng.randrange(-8, 7) for _ in range(20_000)]
    got = rule._bins(np, np.array(vals)).tolist()
    assert got == [bisect.bisect_right(rule.EDGES, v) for v in vals]
