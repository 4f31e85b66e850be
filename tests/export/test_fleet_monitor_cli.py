"""`mlgoodput monitor --fleet` as a user runs it: one line saying where it serves, a /metrics
page whose fleet gauges are the FleetSource's report (promtool finds nothing to report), a
clean stop on Ctrl-C, and one-line errors for options that do not go together."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.export.fleet_jobs import TEAMS, write_jobs

from mlgoodput._cli._fleet_gauges import fleet_range
from mlgoodput.accounting import FleetSource, Prices
from mlgoodput.store import SQLiteStore
from waiting import wait_for

PROMTOOL = shutil.which("promtool")


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "mlgoodput", "monitor", *args]


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))


@contextlib.contextmanager
def _monitor(*args: str) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    """The monitor in its own process and the lines of its stdout (read on a thread), killed
    on the way out if still running."""
    p = subprocess.Popen(_cmd(*args), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    assert p.stdout is not None
    out = p.stdout
    threading.Thread(target=lambda: lines.extend(iter(out.readline, "")), daemon=True).start()
    try:
        yield p, lines
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.slow
def test_fleet_monitor_serves_the_reports_figures(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    db = str(tmp_path / "fleet.db")
    write_jobs(db, TEAMS)
    args = ("--fleet", "--store", db, "--prometheus-port", "0", "--interval", "600", "--quiet")
    with _monitor(*args, "--by", "team", "--top-groups", "2", "--price-per-hour", "2.5") as (p, lines):
        first = wait_for(lambda: lines[:1], 120, "the monitor's first line")[0]
        assert first.startswith("mlgoodput monitor: serving http://127.0.0.1:"), first
        assert "fleet gauges by team (the last 7 days, top 2 groups)" in first, first
        url = first.split()[3]
        text = urllib.request.urlopen(url, timeout=30).read().decode()  # the first upload is in
        st = SQLiteStore(db)
        try:
            want = FleetSource(st).report(*fleet_range(time.time(), 7.0), "team", Prices(default=2.5)).to_dict()
        finally:
            st.close()
        got = {
            (s.name, s.labels.get("group"), s.labels.get("bucket")): s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name.startswith("mlgoodput_fleet_")
        }
        rows = {g["key"]: g for g in want["groups"]}
        for key in ("nlp", "vision"):  # the two largest groups, each on its own
            g = rows[key]
            assert got[("mlgoodput_fleet_accelerator_seconds", key, None)] == g["accelerator_hours"] * 3600.0
            assert got[("mlgoodput_fleet_lost_seconds", key, None)] == g["lost_hours"] * 3600.0
            assert got[("mlgoodput_fleet_goodput_ratio", key, None)] == g["goodput"]
            assert got[("mlgoodput_fleet_lost_cost", key, None)] == g["cost"]["lost"]
            init = g["badput_hours"]["tpu_initialization"] * 3600.0
            assert got[("mlgoodput_fleet_badput_seconds", key, "tpu_initialization")] == init
        other = rows["speech"]["accelerator_hours"] + rows[None]["accelerator_hours"]
        assert got[("mlgoodput_fleet_accelerator_seconds", "other", None)] == pytest.approx(other * 3600.0, rel=1e-12)
        assert {g for n, g, _ in got if n == "mlgoodput_fleet_accelerator_seconds"} == {"nlp", "vision", "other"}
        assert got[("mlgoodput_fleet_total_goodput_ratio", None, None)] == want["total"]["goodput"]
        if PROMTOOL is not None:
            check = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True)
            assert check.returncode == 0, check.stdout + check.stderr
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "stopped" in err and "Traceback" not in err and "incomplete" not in err, err
    assert lines == [first], lines


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "one of the arguments --job --fleet is required"),
        (("--job", "x", "--fleet"), "not allowed with argument"),
        (("--job", "x", "--by", "team", "--prometheus-port", "0"), "--by go with --fleet"),
        (("--fleet", "--tensorboard-dir", "tb", "--prometheus-port", "0"), "--tensorboard-dir do not go with --fleet"),
        (("--fleet",), "nothing to upload to: give --prometheus-port or --otlp-endpoint"),
        (("--fleet", "--prometheus-port", "0", "--top-groups", "-1"), "--top-groups: must be >= 0"),
        (("--fleet", "--prometheus-port", "0", "--range-days", "0"), "--range-days: must be days > 0"),
        (("--fleet", "--prometheus-port", "0", "--store", "memory://"), "memory://"),
        (("--fleet", "--prometheus-port", "0", "--price-per-hour", "-1"), "--price-per-hour must be"),
    ],
)
def test_options_that_do_not_go_together_are_one_line(args: tuple[str, ...], message: str, tmp_path: Path) -> None:
    res = subprocess.run(_cmd(*args), env=_env(), capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert message in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert not (tmp_path / "tb").exists()


def test_a_store_in_no_folder_is_one_line(tmp_path: Path) -> None:
    args = ("--fleet", "--prometheus-port", "0", "--store", str(tmp_path / "no" / "f.db"))
    res = subprocess.run(_cmd(*args), env=_env(), capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and f"no folder {tmp_path / 'no'}" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr
