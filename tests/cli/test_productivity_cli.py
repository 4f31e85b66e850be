"""`mlgoodput report` shows the productivity figures and `mlgoodput advise` advises, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlgoodput.events import EventBatch
from mlgoodput.store import open_store
from tests.cli.test_report_cli import run_cli
from timelines import all_timelines, load


@pytest.fixture
def store(tmp_path: Path) -> str:
    path = str(tmp_path / "p.db")
    st = open_store(path)
    for i, p in enumerate(p for p in all_timelines() if p.stem.startswith(("p1_", "s1_"))):
        tl = load(p)
        st.append(f"goodput_{tl.job_name}", tl.job_name, EventBatch(200 + i, 0, tl.events))
    st.close()
    return path


@pytest.mark.slow
def test_report_json_and_table_carry_productivity(store: str) -> None:
    res = run_cli("report", "--job", "p1-productivity-restart", "--store", store, "--json")
    assert res.returncode == 0, res.stderr
    d = json.loads(res.stdout)
    assert d["program_goodput"] == pytest.approx(0.2)
    assert d["scheduling_goodput"] == pytest.approx(83 / 113)
    assert d["ml_productivity_goodput"] == pytest.approx(0.2 * 31 / 113)
    assert d["mfu"] == pytest.approx(7.2 / 44)
    assert d["ettr"] == pytest.approx(37 / 83)
    assert d["mtbi_s"] == pytest.approx(66.0) and d["mttr_s"] == pytest.approx(27.0)
    assert d["productivity"]["peak_source"] == "configured"
    res = run_cli("report", "--job", "p1-productivity-restart", "--store", store)
    assert res.returncode == 0, res.stderr
    for text in (
        "ML productivity goodput",
        "5.49 %",
        "scheduling goodput",
        "73.45 %",
        "MFU",
        "16.36 %",
        "(configured)",
        "ETTR",
        "44.58 %",
        "MTBI",
        "1 min 06 s",  # mlgoodput._format.duration
        "MTTR",
        "27.0 s",
    ):
        assert text in res.stdout, text


@pytest.mark.slow
def test_report_says_what_is_unknown(store: str) -> None:
    res = run_cli("report", "--job", "s1-clean-run", "--store", store)
    assert res.returncode == 0, res.stderr
    assert "unknown (no submit time)" in res.stdout
    assert "needs step FLOPs and peak" in res.stdout
    d = json.loads(run_cli("report", "--job", "s1-clean-run", "--store", store, "--json").stdout)
    assert d["mfu"] is None and d["mtbi_s"] is None and d["ml_productivity_goodput"] is None


@pytest.mark.slow
def test_advise(store: str) -> None:
    res = run_cli("advise", "--job", "p1-productivity-restart", "--store", store)
    assert res.returncode == 0, res.stderr
    assert "Young interval" in res.stdout and "optimal interval" in res.stdout
    last = res.stdout.strip().splitlines()[-1]
    assert last.startswith(("Checkpoint every", "Keep checkpointing")), last
    d = json.loads(run_cli("advise", "--job", "p1-productivity-restart", "--store", store, "--json").stdout)
    assert d["mtbi_s"] == pytest.approx(66.0) and d["save_s"] == pytest.approx(2.0)
    assert d["young_interval_s"] == pytest.approx((2 * 2.0 * 66.0) ** 0.5)
    # no interruptions: says so, and an assumed MTBI gives advice
    res = run_cli("advise", "--job", "s1-clean-run", "--store", store)
    assert res.returncode == 0 and "No" in res.stdout.splitlines()[-1]
    res = run_cli("advise", "--job", "nope", "--store", store)
    assert res.returncode != 0 and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    res = run_cli("advise", "--job", "s1-clean-run", "--store", store, "--mtbi-s", "-3")
    assert res.returncode != 0 and "Traceback" not in res.stderr
