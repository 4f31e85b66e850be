"""Every identity test starts with no JAX or torch runtime visible and fresh once-only
warnings (tests/conftest.py clears the launcher variables)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def clean_identity(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from mlgoodput._misuse import reset_warned

    # (launcher variables are cleared for every test by tests/conftest.py's `isolated`)
    # another test may have started JAX (or torch) in this process: an initialized runtime
    # wins over the environment, so hide them here (the runtime tests install fakes)
    for mod in ("jax", "jax._src.distributed", "jax._src.xla_bridge", "torch", "torch.distributed"):
        monkeypatch.delitem(sys.modules, mod, raising=False)
    reset_warned()
    yield
    reset_warned()
