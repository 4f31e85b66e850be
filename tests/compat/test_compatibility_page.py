"""docs/compatibility.md is generated from the installed peer packages: it must be current,
and every difference of a peer whose reasons are complete must carry its reason."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("compatibility", ROOT / "scripts" / "compatibility.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["compatibility"] = mod
    spec.loader.exec_module(mod)
    return mod


gen = _generator()


@pytest.mark.slow
def test_page_is_current() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "compatibility.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr + "\n(regenerate with `python scripts/compatibility.py`)"


@pytest.mark.parametrize("peer", gen.load_peers(), ids=lambda p: p.distribution)
def test_every_difference_has_a_reason(peer: object) -> None:
    if not peer.require_reasons:  # type: ignore[attr-defined]
        # this peer's reasons are being written; its page rows say "no reason yet"
        assert "(**no reason yet**)" in gen.render([peer])
        return
    missing = [f"{r.name}: {r.status} {r.notes}" for r in gen.unexplained(peer)]
    assert not missing, "add a reason to " + str(peer.source.relative_to(ROOT)) + ":\n" + "\n".join(missing)  # type: ignore[attr-defined]


def test_the_seed_surface_is_covered() -> None:
    """Every public name of the seed's five modules is on the page and none is missing
    without a reason; the modules the brief names all resolve."""
    peer = next(p for p in gen.load_peers() if p.distribution == "ml-goodput-measurement")
    rows, _ = gen.compare_peer(peer)
    names = {r.name for r in rows}
    assert "ml_goodput_measurement.goodput_utils.GCPOptions.__init__" in {r.name for r in rows if r.status == "same"}
    for want in (
        "ml_goodput_measurement.goodput.GoodputCalculator.get_job_goodput_details",
        "ml_goodput_measurement.goodput.GoodputCalculator.get_interval_metric_details",
        "ml_goodput_measurement.goodput.GoodputCalculator.get_job_goodput_with_exclusions",
        "ml_goodput_measurement.goodput.GoodputRecorder.record_checkpoint_progress",
        "ml_goodput_measurement.goodput.GoodputCalculator.sync_to_gcs",
    ):
        assert want in names
        assert next(r for r in rows if r.name == want).status in ("same", "superset")
    same = {r.name for r in rows if r.status == "same"}
    assert "ml_goodput_measurement.goodput.GoodputRecorder.record_step_start_time" in same
    assert "ml_goodput_measurement.goodput_utils.get_gcp_metadata" in same


def _f_seed(a: int, b: int = 1, *, c: str = "x") -> None: ...
def _f_same(a: int, b: int = 1, *, c: str = "x") -> None: ...
def _f_wider(a: int = 0, b: int = 1, d: int = 2, *, c: str = "x", e: bool = False) -> None: ...
def _f_reordered(b: int = 1, a: int = 0, *, c: str = "x") -> None: ...
def _f_default(a: int, b: int = 2, *, c: str = "x") -> None: ...
def _f_required_extra(a: int, b: int = 1, *, c: str = "x", e: int) -> None: ...
def _f_no_c(a: int, b: int = 1) -> None: ...


@pytest.mark.parametrize(
    ("ours", "status"),
    [
        (_f_same, "same"),
        (_f_wider, "superset"),
        (_f_reordered, "different"),
        (_f_default, "different"),
        (_f_required_extra, "different"),
        (_f_no_c, "different"),
    ],
)
def test_signature_comparison(ours: object, status: str) -> None:
    got, notes = gen.compare_signatures(_f_seed, ours)
    assert got == status, notes
