"""The straggler analysis kept up to date (StragglerAnalysis._Live) gives exactly what the full
pass (`analyze`) gives, on random timelines stored in random batches, in order and out of it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import open_store
from mlgoodput.torch._stragglers import StragglerAnalysis, analyze


def timeline(rng: random.Random, ranks: int, steps: int, shuffle: bool) -> list[Event]:
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
    if shuffle:  # some events arrive late
        for _ in range(len(out) // 50):
            i, j = rng.randrange(len(out)), rng.randrange(len(out))
            out[i], out[j] = out[j], out[i]
    return out


@pytest.mark.parametrize("seed", range(12))
def test_live_analysis_equals_the_full_pass(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    events = timeline(rng, rng.randrange(1, 7), rng.randrange(5, 120), shuffle=seed % 3 == 0)
    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    a = StragglerAnalysis("j", "goodput", store=store)
    live_used = False
    i = seq = 0
    while i < len(events):
        k = rng.randrange(1, 40)
        st.append("goodput", "j", EventBatch(1, seq, events[i : i + k]))
        seq += k
        i += k
        got = a.report()
        live_used |= a._live is not None
        steps: dict[int, list[tuple[float, int]]] = {}
        js: dict[int, list[float]] = {}
        for e in events[:i]:
            if e.kind == Kind.STEP_START:
                steps.setdefault(e.host, []).append((e.time, e.step or 0))
            elif e.kind == Kind.JOB_START:
                js.setdefault(e.host, []).append(e.time)
        want = analyze({h: sorted(v) for h, v in js.items()}, steps)
        assert got == want  # every float bit for bit
    assert live_used or seed % 3 == 0
    st.close()


def test_saved_analysis_is_used_only_while_nothing_new_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlgoodput.torch import _stragglers as mod

    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "always")  # saved whatever the job's size
    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    rng = random.Random(5)
    events = timeline(rng, 3, 50, shuffle=False)
    st.append("goodput", "j", EventBatch(1, 0, events))
    first = mod.saved_stragglers("j", "goodput", store=store)
    assert first == mod.stragglers("j", store=store) and first.steps_compared > 0
    calls = []
    real = StragglerAnalysis.report

    def counting(self: StragglerAnalysis, start: float | None = None, end: float | None = None) -> object:
        calls.append((start, end))
        return real(self, start, end)

    monkeypatch.setattr(StragglerAnalysis, "report", counting)
    assert mod.saved_stragglers("j", "goodput", store=store) == first and not calls  # from the saved analysis
    assert mod.saved_stragglers("j", "goodput", store=store, start=0.0, end=1e12) == first and not calls
    late = max(e.time for e in events) + 1
    st.append("goodput", "j", EventBatch(2, 0, [Event(Kind.STEP_START, late, 0, step=999)]))
    again = mod.saved_stragglers("j", "goodput", store=store)
    assert len(calls) == 1 and again == mod.stragglers("j", store=store) != first
    # a corrupt saved analysis is recomputed, never used
    st.save_state(mod.STATE_NAMESPACE, '["goodput", "j"]', [b'{"magic": "mlgoodput-stragglers", "cursor": "x"'])
    assert mod.saved_stragglers("j", "goodput", store=store) == again and len(calls) == 3  # (stragglers() made one)
    st.close()


def test_small_jobs_and_snapshot_off_save_no_analysis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlgoodput.torch import _stragglers as mod

    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    st.append("goodput", "j", EventBatch(1, 0, timeline(random.Random(3), 3, 30, shuffle=False)))
    for env in ("", "0"):
        monkeypatch.setenv("MLGOODPUT_SNAPSHOT", env)
        assert mod.saved_stragglers("j", "goodput", store=store) == mod.stragglers("j", store=store)
        assert st.load_state(mod.STATE_NAMESPACE, '["goodput", "j"]') is None  # type: ignore[attr-defined]
    st.close()


@pytest.mark.parametrize("seed", range(6))
def test_analysis_fed_the_calculators_pages_equals_the_full_pass(tmp_path: Path, seed: int) -> None:
    """The monitor's wiring: the calculator hands each page it decoded to the analysis, which
    then reads nothing itself and still gives exactly the full pass (snapshot on and off)."""
    from mlgoodput.accounting import GoodputCalculator

    rng = random.Random(100 + seed)
    events = timeline(rng, rng.randrange(2, 6), rng.randrange(5, 80), shuffle=seed % 3 == 0)
    store = f"sqlite://{tmp_path}/s.db"
    st = open_store(store)
    calc = GoodputCalculator("j", "goodput", store=store, snapshot=bool(seed % 2))
    a = StragglerAnalysis("j", "goodput", store=store)
    fed = i = seq = 0
    while i < len(events):
        k = rng.randrange(1, 40)
        st.append("goodput", "j", EventBatch(1, seq, events[i : i + k]))
        seq += k
        i += k
        calc.report()
        if i == k:  # hooked after the first read, as the monitor does: it reads once itself
            calc._part_hooks.append(a.feed)
        in_step = a.cursor == calc._cursor
        fed += in_step
        got = a.report(read=not in_step)
        assert a.cursor == calc._cursor
        steps: dict[int, list[tuple[float, int]]] = {}
        js: dict[int, list[float]] = {}
        for e in events[:i]:
            if e.kind == Kind.STEP_START:
                steps.setdefault(e.host, []).append((e.time, e.step or 0))
            elif e.kind == Kind.JOB_START:
                js.setdefault(e.host, []).append(e.time)
        assert got == analyze({h: sorted(v) for h, v in js.items()}, steps)  # bit for bit
    assert fed >= (len(events) - 1) // 40  # after the first read, fed every time
    st.close()
