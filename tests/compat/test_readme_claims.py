"""The README's claims about switching from ml-goodput-measurement, checked."""

from __future__ import annotations

import datetime
import inspect
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import mlgoodput
from mlgoodput import goodput, monitoring

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()


def _section(title: str) -> str:
    start = README.index(f"## {title}")
    end = README.find("\n## ", start + 3)
    return README[start:end]


def test_the_switching_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The README's "change the import" block, with the names it assumes."""
    monkeypatch.setenv("MLGOODPUT_STORE", str(tmp_path / "s.db"))
    monkeypatch.setenv("MLGOODPUT_JOURNAL_DIR", str(tmp_path / "j"))
    block = re.search(r"```python\n(.*?)```", _section("Switching from ml-goodput-measurement"), re.S)
    assert block is not None
    ns: dict[str, object] = {"run": "readme-run", "datetime": datetime, "start_step": 0, "steps": 5}
    exec(compile(block.group(1), "<README switching block>", "exec"), ns)
    total_goodput, badput_breakdown, last_step = ns["total_goodput"], ns["badput_breakdown"], ns["last_step"]
    assert isinstance(total_goodput, float) and 0.0 <= total_goodput <= 100.0
    assert last_step == 4
    assert goodput.BadputType.OTHER in badput_breakdown  # type: ignore[operator]
    ns["recorder"].close()  # type: ignore[attr-defined]


def test_the_extra_calls_are_ours_and_not_the_seeds() -> None:
    from ml_goodput_measurement import goodput as seed

    bullet = next(
        b
        for b in _section("Switching from ml-goodput-measurement").split("\n- ")
        if b.startswith("Extra calls the seed lacks")
    )
    names = re.findall(r"`(\w+)(?:\(\)|_\*)?`", bullet)
    assert len(names) >= 6, names
    for name in names:
        if name == "GoodputReport":
            assert hasattr(goodput, name) and not hasattr(seed, name)
            continue
        ours = [c for c in (goodput.Recorder, goodput.GoodputCalculator) if any(m.startswith(name) for m in dir(c))]
        theirs = [c for c in (seed.GoodputRecorder, seed.GoodputCalculator) if any(m.startswith(name) for m in dir(c))]
        assert ours and not theirs, name


def test_the_monitor_takes_the_seeds_arguments_in_order() -> None:
    from ml_goodput_measurement import monitoring as seed

    theirs = list(inspect.signature(seed.GoodputMonitor.__init__).parameters)
    ours = list(inspect.signature(monitoring.GoodputMonitor.__init__).parameters)
    assert ours[: len(theirs)] == theirs


def test_import_is_lazy_and_attributes_load() -> None:
    """`import mlgoodput` loads no submodule; `mlgoodput.goodput` loads on first use."""
    code = (
        "import sys, mlgoodput; before = sorted(m for m in sys.modules if m.startswith('mlgoodput.'));"
        "g = mlgoodput.goodput; u = mlgoodput.goodput_utils; w = mlgoodput.MlGoodputWarning;"
        "print(before, g.__name__, u.__name__, w.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split() == ["[]", "mlgoodput.goodput", "mlgoodput.goodput_utils", "MlGoodputWarning"]
    with pytest.raises(AttributeError, match="no attribute 'nosuch'"):
        mlgoodput.nosuch  # noqa: B018


def test_never_throws_claim(tmp_path: Path) -> None:
    """The README's bullet: an end without a start, a duplicate, a step going back."""
    assert "Never throws into training" in README
    r = goodput.Recorder("claim", "goodput_claim", True, store=f"memory://claim-{tmp_path.name}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r.record_tpu_init_end_time()
        r.record_step_start_time(5)
        r.record_step_start_time(3)
        r.record_step_end_time(3)
        r.record_step_end_time(3)
    assert {w.category for w in caught} == {mlgoodput.MlGoodputWarning}
    assert r.misuse_counts == {"end_without_start": 2, "step_back": 1}
    strict = goodput.GoodputRecorder(
        "claim", "goodput_claim", True, store=f"memory://claim-{tmp_path.name}", strict=True
    )
    with pytest.raises(mlgoodput.MlGoodputMisuseError):
        strict.record_tpu_init_end_time()
    r.close()
    strict.close()
