"""`mlgoodput runs`, `runs show NAME` and `runs show NAME --json` on a real SQLite store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from diag_helpers import run_cli

from mlgoodput.diagnostics import machinelearning_run, metric_types, metrics, xprof


def _make_run(store: str) -> str:
    run = machinelearning_run(name="cli", run_group="sweep-1", configs={"epochs": 100, "opt": {"lr": 0.1}}, store=store)
    for step in (1, 2):
        metrics.record(metric_types.MetricType.LOSS, 1.0 / step, step=step)
        metrics.record(metric_types.MetricType.LEARNING_RATE, 0.1, step=step)
    metrics.record("throughput_custom", 5.0)
    with xprof(session_id="s1"):
        pass
    run.end()
    return run.name


def test_runs_show_json_has_the_documented_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "other.db")  # not the default store: --store must be honoured
    name = _make_run(store)
    capsys.readouterr()
    assert run_cli(["runs", "show", name, "--json", "--store", store]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert {"name", "run_group", "configs", "metrics", "profiles"} <= set(doc)
    assert doc["name"] == name and doc["run_group"] == "sweep-1"
    assert doc["configs"] == {"epochs": 100, "opt": {"lr": 0.1}}
    assert [p[:2] for p in doc["metrics"]["loss"]] == [[1, 1.0], [2, 0.5]]
    assert doc["metrics"]["throughput_custom"][0][0] is None
    assert isinstance(doc["metrics"]["learning_rate"][0][2], float)
    assert [p["session"] for p in doc["profiles"]] == ["s1"]
    # a prefix works, and the default store does not have the run
    assert run_cli(["runs", "show", "cli", "--json", "--store", store]) == 0
    assert json.loads(capsys.readouterr().out)["name"] == name
    assert run_cli(["runs", "show", name]) == 1  # the default store does not even exist: created by nothing
    assert "no store at" in capsys.readouterr().err


def test_runs_list_and_show_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = str(tmp_path / "s.db")
    name = _make_run(store)
    capsys.readouterr()
    assert run_cli(["runs", "--store", store]) == 0
    out = capsys.readouterr().out
    assert name in out and "sweep-1" in out
    assert run_cli(["runs", "--store", store, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["name"] == name and row["metric_values"] == 5 and row["profile_starts"] == 1
    assert run_cli(["runs", "show", name, "--store", store]) == 0
    out = capsys.readouterr().out
    assert "epochs = 100" in out and "opt.lr = 0.1" in out
    loss = next(line for line in out.splitlines() if line.strip().startswith("loss"))
    assert loss.split()[1:4] == ["2", "0.5", "0.5"]  # count, last, min
    assert "s1" in out and "programmatic" in out


def test_profile_duration_parsing() -> None:
    from mlgoodput._cli.profile import parse_duration

    assert parse_duration("3s") == 3.0
    assert parse_duration("500ms") == 0.5
    assert parse_duration("2m") == 120.0
    assert parse_duration("1.5") == 1.5
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        parse_duration("soon")
