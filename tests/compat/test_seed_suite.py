"""The seed's own test cases (ml-goodput-measurement 0.2.3, from the installed package) run
against mlgoodput with only their imports changed. Each case is classified in
docs/compatibility/ml_goodput_measurement.toml ([seed_tests]): it passes, or it fails on a
deliberate difference named there (and shown on docs/compatibility.md), or it is not a
public-API case. Original test names are the parameter ids."""

from __future__ import annotations

import logging
import tomllib
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import seed_suite

ROOT = Path(__file__).resolve().parents[2]
TABLE = tomllib.loads((ROOT / "docs" / "compatibility" / "ml_goodput_measurement.toml").read_text())["seed_tests"]
MODULES = ["goodput_test", "goodput_elastic_test", "goodput_utils_test"]


def _status(key: str) -> str | None:
    if key in TABLE:
        return str(TABLE[key])
    return TABLE.get(key.split(".")[0] + ".*")


def _all_cases() -> Iterator[tuple[str, str, str]]:
    for name in sorted(p.stem for p in seed_suite.seed_tests_dir().glob("*_test.py")):
        if _status(f"{name}.x.y") is not None and name not in MODULES:
            continue  # a whole module classified as not ported
        mod = seed_suite.load(name)
        for cname, method in seed_suite.cases(mod):
            yield name, cname, method


CASES = list(_all_cases())
RUN = [c for c in CASES if (_status(".".join(c)) or "").split(":")[0] in ("pass", "differs")]


def test_every_seed_case_is_classified() -> None:
    missing = [".".join(c) for c in CASES if _status(".".join(c)) is None]
    assert not missing, "classify these seed cases in docs/compatibility/ml_goodput_measurement.toml"
    known = {".".join(c) for c in CASES}
    stale = [k for k in TABLE if not k.endswith(".*") and k not in known]
    assert not stale, f"no such seed case: {stale}"
    assert len(RUN) >= 20


@pytest.fixture(scope="module")
def modules() -> dict[str, object]:
    seed_suite.install_adapter_double()
    return {name: seed_suite.load(name) for name in MODULES}


@pytest.mark.parametrize("case", RUN, ids=lambda c: f"{c[0]}::{c[1]}::{c[2]}")
def test_seed_case(case: tuple[str, str, str], modules: dict[str, object]) -> None:
    name, cname, method = case
    status = _status(".".join(case))
    assert status is not None
    logging.disable(logging.WARNING)  # the cases log misuse on purpose
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = seed_suite.run_case(modules[name], cname, method)  # type: ignore[arg-type]
    finally:
        logging.disable(logging.NOTSET)
    problems = [text for _, text in result.errors + result.failures]
    if status == "pass":
        assert not problems, problems[0]
        assert result.testsRun == 1 and not result.skipped
    else:  # "differs: ...": the seed's expectation is not ours, and it fails on the numbers
        assert problems, f"{'.'.join(case)} passes now: reclassify it as pass"
        assert "AssertionError" in problems[0], problems[0]
