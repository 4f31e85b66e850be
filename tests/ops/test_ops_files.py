"""The shipped Grafana dashboard and Prometheus rules: promtool checks and unit tests pass, and
every metric they name is one our endpoint serves."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.ops.test_promtool_metrics import PROMTOOL, endpoint_text, needs_promtool

HERE = Path(__file__).parent


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mlgoodput", *args], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("ops") / "mon"
    res = _cli("dashboards", "install", str(d))
    assert res.returncode == 0, res.stderr
    assert {p.name for p in d.iterdir()} == {"grafana-dashboard.json", "prometheus-rules.yml"}
    return d


@needs_promtool
def test_rules_check_and_unit_tests_pass(installed: Path) -> None:
    assert PROMTOOL is not None
    shutil.copy(HERE / "rules_test.yml", installed / "rules_test.yml")
    res = subprocess.run(
        [PROMTOOL, "check", "rules", "prometheus-rules.yml"], cwd=installed, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0 and "SUCCESS" in res.stdout, res.stdout + res.stderr
    res = subprocess.run(
        [PROMTOOL, "test", "rules", "rules_test.yml"], cwd=installed, capture_output=True, text=True, timeout=60
    )
    assert res.returncode == 0 and "SUCCESS" in res.stdout, res.stdout + res.stderr


@needs_promtool
def test_threshold_option_changes_the_alert(tmp_path: Path) -> None:
    assert PROMTOOL is not None
    res = _cli("dashboards", "print", "rules", "--goodput-threshold", "0.85")
    assert res.returncode == 0 and "job_name:mlgoodput_goodput_ratio:max < 0.85" in res.stdout
    (tmp_path / "r.yml").write_text(res.stdout)
    assert subprocess.run([PROMTOOL, "check", "rules", str(tmp_path / "r.yml")], capture_output=True).returncode == 0
    bad = _cli("dashboards", "print", "rules", "--goodput-threshold", "85")
    assert bad.returncode == 2 and "between 0 and 1" in bad.stderr and "Traceback" not in bad.stderr


def test_install_refuses_to_overwrite(installed: Path) -> None:
    res = _cli("dashboards", "install", str(installed))
    assert res.returncode == 2 and "--force" in res.stderr
    assert _cli("dashboards", "install", str(installed), "--force").returncode == 0


def test_every_metric_named_exists_on_our_endpoint(installed: Path, tmp_path: Path) -> None:
    text = endpoint_text(tmp_path)
    served = {ln.split()[2] for ln in text.splitlines() if ln.startswith("# TYPE")}
    hists = {ln.split()[2] for ln in text.splitlines() if ln.startswith("# TYPE") and ln.endswith(" histogram")}
    served_series = served | {h + part for h in hists for part in ("_bucket", "_sum", "_count")}
    dash = json.loads((installed / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]  # a row has none
    exprs += [v["definition"] for v in dash["templating"]["list"] if "definition" in v]
    exprs += re.findall(r"expr: (.*)", (installed / "prometheus-rules.yml").read_text())
    used = {m for e in exprs for m in re.findall(r"(?<![:\w])mlgoodput_\w+(?![:\w])", e)}
    assert used and used <= served_series, sorted(used - served_series)
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in ("goodput", "badput", "step time", "stall", "disruption", "compile", "host", "fleet"):
        assert topic in titles, topic


def test_the_fleet_row_charts_the_fleet_gauges(installed: Path) -> None:
    """A row of its own, below the job panels, whose panels chart `monitor --fleet`'s gauges
    for one grouping ($fleet_by) and the groups chosen ($fleet_group)."""
    dash = json.loads((installed / "grafana-dashboard.json").read_text())
    panels = dash["panels"]
    rows = [i for i, p in enumerate(panels) if p["type"] == "row"]
    assert len(rows) == 1 and panels[rows[0]]["title"].startswith("Fleet")
    row = panels[rows[0]]
    jobs, fleet = panels[: rows[0]], panels[rows[0] + 1 :]
    assert len(fleet) >= 6 and all(p["title"].startswith("Fleet") for p in fleet)
    assert all(p["gridPos"]["y"] > row["gridPos"]["y"] for p in fleet)
    assert all(p["gridPos"]["y"] + p["gridPos"]["h"] <= row["gridPos"]["y"] for p in jobs)
    assert len({p["id"] for p in panels}) == len(panels)
    used: set[str] = set()
    for p in fleet:
        for t in p["targets"]:
            assert 'by="$fleet_by"' in t["expr"], t["expr"]
            used |= set(re.findall(r"(?<![:\w])mlgoodput_\w+(?![:\w])", t["expr"]))
    assert all(m.startswith("mlgoodput_fleet_") for m in used), used
    want = {
        "mlgoodput_fleet_total_goodput_ratio",
        "mlgoodput_fleet_total_ml_productivity_goodput_ratio",
        "mlgoodput_fleet_total_accelerator_seconds",
        "mlgoodput_fleet_lost_seconds",
        "mlgoodput_fleet_goodput_ratio",
        "mlgoodput_fleet_badput_seconds",
        "mlgoodput_fleet_lost_cost",
    }
    assert want <= used, sorted(want - used)
    names = {v["name"] for v in dash["templating"]["list"]}
    assert {"fleet_by", "fleet_group"} <= names
