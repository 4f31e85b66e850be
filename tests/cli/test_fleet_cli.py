"""`mlgoodput fleet` as a user runs it: its JSON is the FleetSource's report (with job links),
its tables name the groups and the jobs that lost the most, prices come from a flag or a file,
and the default range is the last seven days from the start of that hour."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mlgoodput._cli.fleet import TOP_KEYS, read_prices, time_range
from mlgoodput.accounting import FleetSource
from mlgoodput.events import EventBatch
from mlgoodput.store import SQLiteStore
from tests.accounting.test_fleet import JOBS, D

SRC = str(Path(__file__).parents[2] / "src")


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "fleet.db")
    st = SQLiteStore(path)
    for w, (name, make) in enumerate(JOBS.items(), start=1):
        st.append("log", name, EventBatch(w, 0, make()))
    st.close()
    return path


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "mlgoodput", "fleet", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_json_is_the_fleet_report_with_links(db: str) -> None:
    since, until = str(D - 7200), str(D + 86400)
    res = run("--store", db, "--since", since, "--until", until, "--by", "team", "--json")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert tuple(got) == TOP_KEYS
    st = SQLiteStore(db)
    try:
        want = FleetSource(st).report(float(since), float(until), "team").to_dict()
    finally:
        st.close()
    for row in want["jobs"]:
        row["link"] = f"/jobs/{row['job']}?logger=log"
    assert got == want
    assert {j["job"] for j in got["jobs"]} == {"a", "b", "c", "d"}


def test_tables_and_a_prices_file(db: str, tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('currency = "EUR"\ndefault = 1.5\n[per_hour]\nH100 = 4.0\n')
    res = run("--store", db, "--since", str(D - 7200), "--until", str(D + 86400), "--prices", str(prices))
    assert res.returncode == 0, res.stderr
    out = res.stdout
    assert "Fleet" in out and "by team" in out and "nlp" in out and "vision" in out and "(none)" in out
    assert "lost (EUR)" in out and "jobs that lost the most hours" in out
    assert "counted as 1" in out  # job c recorded no accelerators


def test_prices_files_are_checked(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("default = 'cheap'\n")
    with pytest.raises(ValueError, match="default must be a number >= 0"):
        read_prices(str(bad), None)
    bad.write_text("[per_hour\n")
    with pytest.raises(ValueError, match="not valid TOML"):
        read_prices(str(bad), None)
    bad.write_text("colour = 1\n")
    with pytest.raises(ValueError, match="unknown key 'colour'"):
        read_prices(str(bad), None)
    js = tmp_path / "p.json"
    js.write_text('{"per_hour": {"A100": 2.5}}')
    p = read_prices(str(js), 1.0)
    assert (p.of("A100"), p.of("H100"), p.of(None), p.currency) == (2.5, 1.0, 1.0, "USD")


def test_default_range_is_seven_days_from_the_hour() -> None:
    now = D + 5000.0
    lo, hi = time_range(None, None, now)
    assert hi == now and lo == D + 3600 - 7 * 86400
    assert time_range("1000", "2000", now) == (1000.0, 2000.0)
    with pytest.raises(ValueError, match="--until must be after --since"):
        time_range("2000", "1000", now)


def test_names_that_look_like_markup_print_as_they_are(tmp_path: Path) -> None:
    from mlgoodput.events import Event, Kind

    path = str(tmp_path / "markup.db")
    st = SQLiteStore(path)
    for w, (job, team) in enumerate((("x[/y]", "[bold]nlp"), ("[gpu]", "a[/b]")), start=1):
        ev = [
            Event(Kind.JOB_START, D),
            Event(Kind.JOB_LABELS, D, attrs={"labels": {"team": team}}),
            *[Event(Kind.STEP_START, D + 1 + k, step=k) for k in range(5)],
            Event(Kind.JOB_END, D + 6),
        ]
        st.append("log", job, EventBatch(w, 0, ev))
    st.close()
    res = run("--store", path, "--since", "2023-11-14T23:00", "--until", "2023-11-15T01:00")
    assert res.returncode == 0, res.stderr
    for text in ("x[/y]", "[gpu]", "[bold]nlp", "a[/b]"):
        assert text in res.stdout, text


def test_times_without_a_zone_are_utc(db: str) -> None:
    """As on the fleet page: 2023-11-15 is D whatever this machine's zone."""
    env_tz = {"TZ": "Asia/Tokyo"}
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlgoodput",
            "fleet",
            "--store",
            db,
            "--since",
            "2023-11-15",
            "--until",
            "2023-11-15T01:00",
            "--json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": SRC, **env_tz},
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert (got["since"], got["until"]) == (D, D + 3600)
