"""TensorBoard output a person can read: few JAX charts, a layout, monotonic steps across
writers, one writer per folder for monitors, and the profile plugin installed."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from mlgoodput.export import Sample, TensorBoardExporter

pytest.importorskip("tensorboard")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def _acc(d: Path) -> EventAccumulator:
    acc = EventAccumulator(str(d))
    acc.Reload()
    return acc


def _jax(fun: str, count: float, total: float, mx: float) -> list[Sample]:
    labels = {"job_name": "j", "host": "0", "fun_name": fun}
    n = "jax/core/compile/backend_compile_duration"
    return [
        Sample(n + "/count", count, labels, "counter"),
        Sample(n + "/sum", total, labels, "counter"),
        Sample(n + "/max", mx, labels),
        Sample(n + "/min", mx / 2, labels),
        Sample(n + "/last", mx, labels),
        Sample(n + "/bucket", count, {**labels, "le": "+Inf"}, "counter"),
    ]


def test_jax_tags_are_summed_over_functions_and_laid_out(tmp_path: Path) -> None:
    exp = TensorBoardExporter(tmp_path / "jax")
    samples = [s for i in range(40) for s in _jax(f"jit(f{i})", 1, 0.5, 0.1 * (i + 1))]
    exp.export(samples)
    exp.shutdown()
    acc = _acc(tmp_path / "jax")
    tags = sorted(acc.Tags()["scalars"])
    base = "jax/core/compile/backend_compile_duration"
    assert tags == [f"{base}/count/host=0", f"{base}/max/host=0", f"{base}/sum/host=0"]  # not 240 tags
    assert acc.Scalars(f"{base}/count/host=0")[-1].value == 40
    assert acc.Scalars(f"{base}/sum/host=0")[-1].value == pytest.approx(20.0)
    assert acc.Scalars(f"{base}/max/host=0")[-1].value == pytest.approx(4.0)
    assert "custom_scalars__config__" in acc.Tags()["tensors"]


def test_steps_continue_across_processes(tmp_path: Path) -> None:
    """A second writer (a restarted attempt) continues the step axis instead of restarting it,
    and an explicit step that goes back (a restored job) never moves a tag backwards."""
    d = tmp_path / "tb"
    first = TensorBoardExporter(d)
    for _ in range(3):
        first.export([*_jax("jit(f)", 1, 1, 1), Sample("goodput/last_step", 25, {"job_name": "j"}, step=25)])
    first.shutdown()
    second = TensorBoardExporter(d)
    for _ in range(2):
        second.export([*_jax("jit(f)", 2, 2, 1), Sample("goodput/last_step", 20, {"job_name": "j"}, step=20)])
    second.shutdown()
    assert len(list(d.glob("events.out.tfevents.*"))) == 2
    acc = _acc(d)
    steps = [e.step for e in acc.Scalars("jax/core/compile/backend_compile_duration/count/host=0")]
    assert steps == [1, 2, 3, 4, 5]
    assert [e.step for e in acc.Scalars("goodput/last_step")] == [25, 25, 25, 25, 25]


def test_a_second_monitor_on_one_folder_is_refused(tmp_path: Path) -> None:
    a = TensorBoardExporter(tmp_path / "goodput", exclusive=True)
    a.start()
    b = TensorBoardExporter(tmp_path / "goodput", exclusive=True, lock_wait_s=0.3)
    try:
        with pytest.raises(ValueError, match="another mlgoodput process"):
            b.start()
    finally:
        a.shutdown()
    b.start()  # free once the first has stopped
    b.shutdown()


def test_profile_plugin_is_installed_with_the_diagnostics_extra() -> None:
    requires = metadata.requires("mlgoodput") or []
    assert any(r.startswith("tensorboard-plugin-profile") and 'extra == "diagnostics"' in r for r in requires)
    plugins = {ep.name for ep in metadata.entry_points(group="tensorboard_plugins")}
    assert "profile" in plugins


def test_tags_follow_the_labels_of_each_upload(tmp_path: Path) -> None:
    """The exporter names a series once and reuses the name: a label whose value changes is
    another series (its own tag), and a name missing a label still fails on every upload."""
    exp = TensorBoardExporter(tmp_path / "tb")
    for i in range(3):
        exp.export(
            [
                Sample("stragglers/held_back_seconds", float(i), {"job_name": "j", "rank": str(r)}, step=i)
                for r in range(2 + i)
            ]
        )
    for _ in range(2):
        with pytest.raises(ValueError, match="needs labels"):
            exp.export([Sample("badput/{bucket}_seconds", 1.0, {"job_name": "j"})])
    exp.shutdown()
    acc = _acc(tmp_path / "tb")
    tags = sorted(t for t in acc.Tags()["scalars"] if t.startswith("stragglers/"))
    assert tags == [f"stragglers/held_back_seconds/rank={r}" for r in range(4)]
    assert [e.value for e in acc.Scalars("stragglers/held_back_seconds/rank=1")] == [0.0, 1.0, 2.0]
    assert [e.value for e in acc.Scalars("stragglers/held_back_seconds/rank=3")] == [2.0]
