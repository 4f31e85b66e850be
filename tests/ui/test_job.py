"""A job's view grown batch by batch (as a live page sees it) equals the view read at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from ui_helpers import scenario

from mlgoodput.events import EventBatch
from mlgoodput.store import SQLiteStore
from mlgoodput.ui import _charts
from mlgoodput.ui._job import JobView

NAMES = ["s2_custom_and_async_data", "s3_checkpoint_save_restore", "s4_disruption_restart",
         "s7_crash_loop", "s8_multihost_duplicates", "s9_elastic_pause", "s12_custom_at_edges"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("batch", [1, 7])
def test_incremental_view_equals_one_read(name: str, batch: int, tmp_path: Path) -> None:
    tl = scenario(name)
    q = tl.query
    whole = SQLiteStore(tmp_path / "whole.db")
    whole.append("g", tl.job_name, EventBatch(1, 0, tl.events))
    grown = SQLiteStore(tmp_path / "grown.db")
    live = JobView(grown, tl.job_name, "g", clock=lambda: q)
    for i in range(0, len(tl.events), batch):
        grown.append("g", tl.job_name, EventBatch(1, i, tl.events[i : i + batch]))
        live.refresh()
        live.detail()
        _charts.timeline(live, 800)
    once = JobView(whole, tl.job_name, "g", clock=lambda: q)
    once.refresh()
    assert live.report().to_dict() == once.report().to_dict()
    for h in once.hosts:
        assert live._pairs(live.hosts[h]) == once._pairs(once.hosts[h])
        assert list(live.hosts[h].durs) == pytest.approx(list(once.hosts[h].durs), nan_ok=True)
    assert live.attempts() == once.attempts()
    assert _charts.timeline(live, 800) == _charts.timeline(once, 800)
    assert _charts.steps(live, 300) == _charts.steps(once, 300)
    d1, d2 = live.detail(), once.detail()
    assert d1 == d2
    whole.close()
    grown.close()
