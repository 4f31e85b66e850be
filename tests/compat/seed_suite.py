"""Load the seed's own test modules from the installed ml-goodput-measurement package with
only their imports changed (`ml_goodput_measurement.src` -> `mlgoodput`), so its public-API
cases run against mlgoodput. Nothing of the seed's tests is copied into this repository."""

from __future__ import annotations

import importlib.util
import itertools
import sys
import types
import unittest
from pathlib import Path
from typing import Any

import mlgoodput.store
from mlgoodput.store import MemoryStore

IMPORTS = {
    "from ml_goodput_measurement.src import goodput_elastic": "from mlgoodput import goodput_elastic",
    "from ml_goodput_measurement.src import goodput_utils": "from mlgoodput import goodput_utils",
    "from ml_goodput_measurement.src import goodput": "from mlgoodput import goodput",
    "from google3.testing.pybase import googletest": "from absl.testing import absltest as googletest",
}


def seed_tests_dir() -> Path:
    spec = importlib.util.find_spec("ml_goodput_measurement")
    assert spec is not None and spec.origin is not None, "pip install -e '.[test]' installs the seed"
    return Path(spec.origin).parent / "tests"


def load(name: str) -> types.ModuleType:
    """The seed's `tests/<name>.py` with its imports pointed at mlgoodput."""
    from absl import flags

    if not flags.FLAGS.is_parsed():  # absltest's tempdirs read --test_tmpdir
        flags.FLAGS.mark_as_parsed()
    src = (seed_tests_dir() / f"{name}.py").read_text()
    for old, new in IMPORTS.items():
        src = src.replace(old + "\n", new + "\n")
    assert "ml_goodput_measurement" not in src.replace("ml_goodput_measurement import", ""), name
    mod = types.ModuleType(f"seed_{name}")
    mod.__file__ = str(seed_tests_dir() / f"{name}.py")
    sys.modules[mod.__name__] = mod
    exec(compile(src, mod.__file__, "exec"), mod.__dict__)
    return mod


def cases(mod: types.ModuleType) -> list[tuple[str, str]]:
    """(class, method) of every test in the module, in file order."""
    out = []
    for cname, cls in vars(mod).items():
        if isinstance(cls, type) and issubclass(cls, unittest.TestCase) and cls.__module__ == mod.__name__:
            out += [(cname, m) for m in unittest.TestLoader().getTestCaseNames(cls)]
    return out


def run_case(mod: types.ModuleType, cname: str, method: str) -> unittest.TestResult:
    result = unittest.TestResult()
    getattr(mod, cname)(method).run(result)
    return result


# -- the cloud_logger adapter ---------------------------------------------------------------
# The seed's tests hand a mock cloud logger to the recorder and the calculator. Production code
# turns it into a store with `mlgoodput.store.from_cloud_logger` (the Cloud Logging store). Where
# that function is not in this build yet, this double stands in: one memory store per cloud
# logger object, so a recorder and a calculator given the same object share their events. It
# does not write entries into the mock, so cases that read the mock's entries need the real one.
_stores: dict[int, tuple[Any, MemoryStore]] = {}
_ids = itertools.count()
HAS_REAL_ADAPTER = hasattr(mlgoodput.store, "from_cloud_logger")


def _double(cloud_logger: Any, logger_name: str) -> MemoryStore:
    key = id(cloud_logger)
    held = _stores.get(key)
    if held is None or held[0] is not cloud_logger:
        held = _stores[key] = (cloud_logger, MemoryStore(f"memory://seed-suite-{next(_ids)}"))
    return held[1]


def install_adapter_double() -> None:
    if not HAS_REAL_ADAPTER:
        mlgoodput.store.from_cloud_logger = _double  # type: ignore[attr-defined]
