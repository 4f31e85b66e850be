"""Per-host series of large jobs (docs/exporting.md, "Per-host series of large jobs"): every
host every upload up to ALL_HOSTS_UP_TO hosts; above, what changed (and a refresh), at most
HOSTS_PER_UPLOAD hosts an upload, the straggler first; every value sent the current one."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

import pytest

from mlgoodput._monitoring import _host_series
from mlgoodput._monitoring._host_series import HostSeries
from mlgoodput._monitoring._samples import cumulative_samples
from mlgoodput._monitoring._source import GoodputSource
from mlgoodput._monitoring._straggler_samples import straggler_samples
from mlgoodput.accounting import GoodputCalculator, HostStepStats, RankStepStats
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.export import Sample
from mlgoodput.store import open_store


@pytest.fixture(autouse=True, params=["numpy", "loop"])
def _compare_way(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test here both ways `_Family.changed` compares (numpy from a few hosts on, or its
    C-level loop): the same hosts either way."""
    if request.param == "numpy":
        pytest.importorskip("numpy")
    monkeypatch.setattr(_host_series, "_NUMPY_FROM", 0 if request.param == "numpy" else 10**9)


def _hosts(n: int, median: float = 1.0, moved: Iterable[int] = ()) -> tuple[HostStepStats, ...]:
    bump = set(moved)
    return tuple(HostStepStats(h, 10, median + (0.5 if h in bump else 0.0), 1.5, 2.0) for h in range(n))


def _ranks(n: int, held: dict[int, float] | None = None, lag: float = 0.0) -> tuple[RankStepStats, ...]:
    held = held or {}
    return tuple(RankStepStats(r, 10, 1.0, 1.5, 2.0, lag + r * 1e-3, 0, held.get(r, 0.0)) for r in range(n))


def _ids(rows: Iterable[HostStepStats | RankStepStats]) -> list[int]:
    return [getattr(r, "host", None) if isinstance(r, HostStepStats) else r.rank for r in rows]  # type: ignore[misc]


def test_small_jobs_send_every_host_every_upload() -> None:
    hs = HostSeries()
    hosts, ranks = _hosts(_host_series.ALL_HOSTS_UP_TO), _ranks(_host_series.ALL_HOSTS_UP_TO)
    for _ in range(3):
        got_h, got_r = hs.pick(hosts, ranks)
        assert got_h is hosts and got_r is ranks  # the very same: nothing left out, nothing copied


def test_large_jobs_send_what_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_host_series, "ALL_HOSTS_UP_TO", 4)
    hs = HostSeries()
    hosts, ranks = _hosts(10), _ranks(10)
    got_h, got_r = hs.pick(hosts, ranks)
    assert _ids(got_h) == _ids(got_r) == list(range(10))  # the first upload: every host
    assert hs.pick(_hosts(10), _ranks(10)) == ([], [])  # nothing changed: no per-host series
    got_h, got_r = hs.pick(_hosts(10, moved=[3]), _ranks(10, {7: 0.5}))
    assert _ids(got_h) == [3, 7] and _ids(got_r) == [3, 7]  # both families of a changed host
    assert [h.median_s for h in got_h] == [1.5, 1.0] and got_r[1].held_back_s == 0.5  # the current values
    assert hs.pick(_hosts(10, moved=[3]), _ranks(10, {7: 0.5})) == ([], [])
    got_h, got_r = hs.pick(_hosts(11), _ranks(11))  # a new host; host 3 back to 1.0
    assert _ids(got_h) == _ids(got_r) == [3, 7, 10]  # rank 7: held_back back to 0
    nan = tuple(HostStepStats(h, 10, math.nan if h == 2 else 1.0, 1.5, 2.0) for h in range(11))
    assert _ids(hs.pick(nan, _ranks(11))[0]) == [2]


def test_unchanged_hosts_are_sent_again_after_the_refresh(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_host_series, "ALL_HOSTS_UP_TO", 4)
    monkeypatch.setattr(_host_series, "REFRESH_UPLOADS", 3)
    hs = HostSeries()
    hosts, ranks = _hosts(8), _ranks(8)
    sent = [_ids(hs.pick(hosts, ranks)[0]) for _ in range(7)]
    assert sent == [list(range(8)), [], [], list(range(8)), [], [], list(range(8))]
    hs.pick(_hosts(8, moved=[5]), ranks)  # upload 8: host 5 changed, so its refresh moves on
    sent = [_ids(hs.pick(_hosts(8, moved=[5]), ranks)[0]) for _ in range(4)]
    assert sent == [[], [0, 1, 2, 3, 4, 6, 7], [5], []]  # uploads 9 to 12


def test_a_refresh_the_bound_put_off_stays_due(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_host_series, "ALL_HOSTS_UP_TO", 4)
    monkeypatch.setattr(_host_series, "HOSTS_PER_UPLOAD", 4)
    monkeypatch.setattr(_host_series, "REFRESH_UPLOADS", 3)
    hs = HostSeries()
    last: dict[int, int] = {}
    for u in range(1, 40):  # hosts 0 and 1 change every upload; 2..11 never do
        hosts = tuple(HostStepStats(h, 10, 1.0 + (u if h < 2 else 0), 1.5, 2.0) for h in range(12))
        got_h, _ = hs.pick(hosts, _ranks(12))
        for h in _ids(got_h):
            last[h] = u
    # with room for two refreshes an upload, every quiet host still goes out again and again
    assert all(last[h] >= 39 - 10 for h in range(2, 12)), last


def test_the_bound_sends_the_straggler_first_and_every_host_in_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_host_series, "ALL_HOSTS_UP_TO", 4)
    monkeypatch.setattr(_host_series, "HOSTS_PER_UPLOAD", 5)
    monkeypatch.setattr(_host_series, "FIRST_RANKS", 2)
    hs = HostSeries()
    hs.pick(_hosts(20), _ranks(20))
    sent = []
    for k in range(1, 5):  # every value of every host changes every upload
        held = {17: 9.0 + k, 11: 5.0 + k, 4: 1.0 + k}
        got_h, got_r = hs.pick(_hosts(20, median=1.0 + k), _ranks(20, held, lag=k), straggler=2)
        assert _ids(got_r) == _ids(got_h)
        sent.append(_ids(got_h))
    # the straggler, the two ranks holding the others back most, then the longest waiting
    assert sent == [[0, 1, 2, 11, 17], [2, 3, 4, 11, 17], [2, 5, 6, 11, 17], [2, 7, 8, 11, 17]]
    got_h, got_r = hs.pick(_hosts(20, median=9.0), _ranks(20, lag=9.0), final=True)
    assert _ids(got_h) == _ids(got_r) == list(range(20))  # the final upload: every change, no bound


def test_a_job_that_shrinks_sends_every_host_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_host_series, "ALL_HOSTS_UP_TO", 4)
    hs = HostSeries()
    hs.pick(_hosts(6), _ranks(6))
    assert hs.pick(_hosts(6), _ranks(6)) == ([], [])
    small_h, small_r = _hosts(3), _ranks(3)
    assert hs.pick(small_h, small_r) == (small_h, small_r)
    assert _ids(hs.pick(_hosts(6), _ranks(6))[0]) == list(range(6))  # starts over: the first again


def _record(url: str, hosts: int, steps: range, t0: float, seq: int) -> None:
    st = open_store(url)
    for h in range(hosts):
        events = [Event(Kind.JOB_START, t0, h)] if seq == 0 else []
        # host 3 is late on every step from 20 on: its rank values change while the others' settle
        late = [0.3 if h == 3 and n >= 20 else 0.0 for n in steps]
        events += [
            Event(Kind.STEP_START, t0 + 1 + n + h * 1e-3 + x, h, step=n) for n, x in zip(steps, late, strict=True)
        ]
        st.append("goodput", "j", EventBatch(10 + h, seq, events))
    st.close()


def _per_host(samples: list[Sample]) -> dict[tuple[str, str, str], float]:
    """Each per-host sample's value by (name, host or rank, stat)."""
    out = {}
    for s in samples:
        key = s.labels.get("host") or s.labels.get("rank")
        if key is not None:
            out[(s.name, key, s.labels.get("stat", ""))] = s.value
    return out


def test_the_source_sends_the_current_values_of_what_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job of 6 hosts above a bound of 4: the first upload has every host's series, a later
    one with the same values none, and each series sent holds the value that a full upload
    would hold (what the calculator says now)."""
    monkeypatch.setattr(_host_series, "ALL_HOSTS_UP_TO", 4)
    url = f"sqlite://{tmp_path}/s.db"
    t0 = 1_800_000_000.0
    _record(url, 6, range(10), t0, 0)
    src = GoodputSource("j", "goodput", url, clock=lambda: t0 + 100)
    check = GoodputCalculator("j", "goodput", store=url)

    def full() -> dict[tuple[str, str, str], float]:
        r = check.report(at=t0 + 100)
        return _per_host(cumulative_samples(r) + straggler_samples(r, check.stragglers(r.start, None)))

    first = _per_host(src.collect(t0 + 100))
    assert first == full() and len(first) == 6 * 6
    again = src.collect(t0 + 100)
    assert _per_host(again) == {} and any(s.name == "goodput/goodput_pct" for s in again)
    _record(url, 6, range(10, 30), t0, 1)  # host 3 late from step 20: its series move
    got = _per_host(src.collect(t0 + 100))
    want = full()
    assert got and all(want[k] == v for k, v in got.items())  # the current values
    assert {k[1] for k in got} >= {"3"}


def test_the_calculators_columns_give_what_its_rows_give(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job whose hosts the calculator updates together (24 hosts, a few new steps each): the
    straggler analysis and the choice of hosts read the statistics as the calculator's columns,
    and both come out as a fresh calculator's rows give them."""
    pytest.importorskip("numpy")  # (hosts are updated together with numpy only)
    monkeypatch.setattr(_host_series, "ALL_HOSTS_UP_TO", 4)
    monkeypatch.setattr(_host_series, "HOSTS_PER_UPLOAD", 10**6)
    url = f"sqlite://{tmp_path}/s.db"
    t0 = 1_800_000_000.0
    _record(url, 24, range(60), t0, 0)
    src = GoodputSource("j", "goodput", url, clock=lambda: t0 + 200)
    src.collect(t0 + 200)
    made = []
    for k, upto in enumerate((62, 64, 66, 69, 71)):
        new = range(upto - (3 if k == 3 else 2), upto)
        _record(url, 24, new, t0, new[0] + 1)  # (each writer's batch numbered on from its last event)
        got = src.collect(t0 + 200)
        calc = src._calc()
        report = calc.report(at=t0 + 200)
        lag = calc.stragglers(report.start, None, read=False)
        hc, rc = calc.columns_of(report.hosts, lag.ranks)
        made.append(hc is not None and rc is not None)
        if hc is None:  # (the first updates sort each host's gaps: host by host)
            continue
        assert (hc.hosts, hc.steps, hc.median, hc.p90, hc.max) == tuple(
            list(col)
            for col in zip(*[(h.host, h.steps, h.median_s, h.p90_s, h.max_s) for h in report.hosts], strict=True)
        )
        assert hc.arrays is not None and [a.tolist() for a in hc.arrays] == [hc.median, hc.p90, hc.max]
        assert [list(rc.ranks), list(rc.held_back), list(rc.median), list(rc.mean_lag)] == [
            [getattr(r, f) for r in lag.ranks] for f in ("rank", "held_back_s", "median_step_s", "mean_lag_s")
        ]
        fresh = GoodputCalculator("j", "goodput", store=url)
        want = fresh.report(at=t0 + 200)
        assert report.hosts == want.hosts
        assert lag == fresh.stragglers(want.start, None)
        sent = _per_host(got)
        full = _per_host(cumulative_samples(want) + straggler_samples(want, fresh.stragglers(want.start, None)))
        assert sent and all(full[key] == v for key, v in sent.items())  # the current values
        assert {key[1] for key in sent} >= {"3"}  # host 3's values move: sent
    assert made[-3:] == [True, True, True], made  # (the columns were made, and are these rows')
