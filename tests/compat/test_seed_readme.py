"""The seed's README code blocks run against mlgoodput with only the import line changed.

Source: the README of the installed ml-goodput-measurement 0.2.3 (its package metadata), and
the seed documents in ../shared/seeds (001, 002) where this checkout sits in that workspace.
Blocks run in order in one namespace, as a reader pastes them. Fragments get the names they
assume (`config`, `jax`, a data iterator, ...) and nothing else; a `def` whose body the README
did not indent is indented. A block that fails with the seed itself fails here the same way,
and the test says so.
"""

from __future__ import annotations

import datetime
import enum
import importlib.metadata
import re
import sys
import textwrap
import types
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

import mlgoodput

# The workspace's seed documents sit in a `shared/seeds` folder above the checkout, if any.
SHARED_SEEDS = next(
    (d / "shared" / "seeds" for d in Path(__file__).resolve().parents if (d / "shared" / "seeds").is_dir()),
    Path("/nonexistent"),
)

#: Blocks that fail with the seed itself, by a line they contain -> (exception, text in it, why).
FAILS_WITH_THE_SEED = {
    "total_goodput, _, _ = goodput_calculator.get_job_goodput()\n": (
        ValueError,
        "no recorded time",
        "the block asks for the goodput before the README's program has recorded anything: the seed"
        " raises ValueError('Total job time is zero ...') there too",
    ),
    "goodput, badput_breakdown, last_step = goodput_calculator.get_job_goodput(": (
        ValueError,
        "no recorded time",
        "asked before anything was recorded, as above (the seed raises ValueError too); afterwards the"
        " block would rebind `goodput` (the module) to a float and read goodput.BadputType",
    ),
    "total_goodput = goodput_calculator.get_job_goodput()\n": (
        ValueError,
        "no recorded time",
        "asked before anything was recorded (the seed raises ValueError too); an older README besides:"
        " get_job_goodput returns a tuple since 0.0.x, so formatting it would fail",
    ),
    "goodput_monitor = goodput.GoodputMonitor(": (
        AttributeError,
        "GoodputMonitor",
        "an older README: GoodputMonitor lives in `monitoring` (0.2.3 has no goodput.GoodputMonitor)",
    ),
}


def _sources() -> list[tuple[str, str]]:
    out = [("installed 0.2.3 README", importlib.metadata.metadata("ml-goodput-measurement").get_payload())]  # type: ignore[attr-defined]
    for pattern in ("001_*.txt", "002_*.txt"):
        out += [(p.name, p.read_text()) for p in sorted(SHARED_SEEDS.glob(pattern))]
    return out


def _blocks(text: str) -> list[str]:
    out = []
    for raw in re.findall(r"```python[ \t]*\n(.*?)```", text, re.S):
        lines = textwrap.dedent(raw).splitlines()
        cut = next((i for i, ln in enumerate(lines) if re.match(r"#{2,} ", ln)), len(lines))
        out.append("\n".join(lines[:cut]).strip("\n") + "\n")  # markdown leaking into a block
    return out


def _adapt(block: str) -> str:
    """Change the import line; indent a `def` body the README left flush with the `def`."""
    block = block.replace("from ml_goodput_measurement import", "from mlgoodput import")
    lines = block.splitlines()
    if lines and lines[0].startswith("def ") and len(lines) > 1 and not lines[1].startswith((" ", "\t")):
        lines = [lines[0]] + ["  " + ln if ln.strip() else ln for ln in lines[1:]]
    return "\n".join(lines) + "\n"


def _namespace(tmp_path: Path) -> dict[str, Any]:
    """The names the README's fragments assume, and nothing else."""
    import jax
    import numpy as np

    config = types.SimpleNamespace(
        run_name="seed-readme-run",
        steps=6,
        eval_interval=2,
        sdc_check_interval=3,
        tensorboard_dir=str(tmp_path / "tb"),
        goodput_upload_interval_seconds=1,
        monitor_goodput=True,
    )

    def convert_pst_to_utc(text: str) -> datetime.datetime:
        local = datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S").replace(tzinfo=ZoneInfo("America/Los_Angeles"))
        return local.astimezone(datetime.UTC)

    pathwaysutils = types.ModuleType("pathwaysutils")
    pathwaysutils.is_pathways_backend_used = lambda: False  # type: ignore[attr-defined]
    sys.modules.setdefault("pathwaysutils", pathwaysutils)
    return {
        "__name__": "seed_readme",
        "config": config,
        "jax": jax,
        "np": np,
        "datetime": datetime,
        "enum": enum,
        "Sequence": Sequence,
        "start_step": 0,
        "logger_name": f"goodput_{config.run_name}",
        "job_name": config.run_name,
        "logging_enabled": True,
        "is_lead_host": True,
        "tensorboard_dir": config.tensorboard_dir,
        "convert_pst_to_utc": convert_pst_to_utc,
        "load_next_batch": lambda it, batch, cfg: batch,
        "data_iterator": iter(()),
        "example_batch": None,
        "load_batch": lambda data: data,
        "train_data": [],
        "run_train_step": lambda step, state: state,
        "run_step_evaluation": lambda model, data: None,
        "model": None,
        "val_data": None,
        "run_sdc_check": lambda state: None,
        "goodput_utils": mlgoodput.goodput_utils,  # the README uses it without importing it
    }


SOURCES = _sources()


@pytest.mark.slow
@pytest.mark.parametrize(("source", "text"), SOURCES, ids=[s for s, _ in SOURCES])
def test_readme_blocks_run(source: str, text: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLGOODPUT_STORE", str(tmp_path / "store.db"))
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")  # no metadata server here: off at once
    monkeypatch.setenv("MLGOODPUT_JOURNAL_DIR", str(tmp_path / "journals"))
    ns = _namespace(tmp_path)
    blocks = _blocks(text)
    assert len(blocks) >= 6, source
    ran = failed_as_seed = 0
    lost: set[str] = set()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", mlgoodput.MlGoodputWarning)  # block 22 sends 'elastic_scale_up'
            for block in blocks:
                code = compile(_adapt(block), f"<{source} block>", "exec")
                expected = next((v for k, v in FAILS_WITH_THE_SEED.items() if k in block), None)
                if expected is None:
                    try:
                        exec(code, ns)
                    except NameError as e:  # only a name that a block failing with the seed defines
                        assert e.name in lost, f"{source}: {e}"
                        failed_as_seed += 1
                        continue
                    ran += 1
                    continue
                exc, text_in, _why = expected
                with pytest.raises(exc, match=re.escape(text_in)):
                    exec(code, ns)
                failed_as_seed += 1
                lost.update(re.findall(r"^(\w+)\s*=", block, re.M))
                ns["goodput"] = mlgoodput.goodput  # as a reader would, after that block
            # Complete the fragments: run the program they describe, then ask for its goodput.
            if "main" in ns:
                ns["main"]([])
            elif "train_loop" in ns:
                ns["goodput_recorder"].record_job_start_time()
                ns["train_loop"](ns["config"])
                ns["goodput_recorder"].record_job_end_time()
            if "record_elastic_scale" in ns:
                ns["record_elastic_scale"]()
        assert ran >= 5
        calc = mlgoodput.goodput.GoodputCalculator(job_name=ns["config"].run_name, logger_name=ns["logger_name"])
        goodput_pct, breakdown, _ = calc.get_job_goodput(include_badput_breakdown=True)
        assert 0.0 <= goodput_pct <= 100.0
        assert mlgoodput.goodput.BadputType.TPU_INITIALIZATION in breakdown
        report = calc.report()
        assert report.last_step == ns["config"].steps - 1
        if "goodput_monitor" in ns:
            assert (tmp_path / "tb" / "goodput").is_dir() or not ns["goodput_monitor"].monitoring_enabled
    finally:
        for value in list(ns.values()):
            if isinstance(value, mlgoodput.monitoring.GoodputMonitor):
                value.close(timeout_s=5)
            elif isinstance(value, mlgoodput.goodput.GoodputRecorder):
                value.close()
