"""`from ml_goodput_measurement.src import goodput_elastic` (axlearn's guarded import) has a
twin: `from mlgoodput.src import goodput_elastic` gives the very module `mlgoodput.goodput_elastic`,
so code that falls back when the import fails keeps its elastic path after the switch."""

from __future__ import annotations

import importlib

import pytest

import mlgoodput
import mlgoodput.src


@pytest.mark.parametrize("name", mlgoodput.src.MODULES)
def test_each_src_module_is_the_top_level_one(name: str) -> None:
    assert importlib.import_module(f"mlgoodput.src.{name}") is importlib.import_module(f"mlgoodput.{name}")
    assert getattr(mlgoodput.src, name) is importlib.import_module(f"mlgoodput.{name}")


def test_the_seed_src_modules_we_have_are_all_twinned() -> None:
    seed_src = pytest.importorskip("ml_goodput_measurement.src")
    import pkgutil

    seed_names = {m.name for m in pkgutil.iter_modules(seed_src.__path__)}
    ours = {n for n in seed_names if importlib.util.find_spec(f"mlgoodput.{n}") is not None}
    assert ours == set(mlgoodput.src.MODULES)


def test_axlearns_guarded_import_finds_the_elastic_classes() -> None:
    try:
        from mlgoodput.src import goodput_elastic, monitoring_elastic
    except ImportError:  # what axlearn does when it fails: the elastic path is dropped
        goodput_elastic = monitoring_elastic = None
    assert goodput_elastic is not None and monitoring_elastic is not None
    assert goodput_elastic.ElasticGoodputRecorder.__name__ == "ElasticGoodputRecorder"
    assert monitoring_elastic.ElasticGoodputMonitor.__name__ == "ElasticGoodputMonitor"
    assert mlgoodput.src is importlib.import_module("mlgoodput.src")
