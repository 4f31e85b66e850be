"""`import mlgoodput` loads nothing, and every public module loads as an attribute of it
(`mlgoodput.torch` as `mlgoodput.jax` does), named in the package's docstring."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import mlgoodput

#: public modules that are not library modules: the command line's entry point
NOT_ATTRIBUTES = {"cli"}


def public_modules() -> set[str]:
    return {m.name for m in pkgutil.iter_modules(mlgoodput.__path__) if not m.name.startswith("_")} - NOT_ATTRIBUTES


def test_every_public_module_is_a_lazy_attribute_named_in_the_docstring() -> None:
    doc = mlgoodput.__doc__ or ""
    for name in sorted(public_modules()):
        assert name in dir(mlgoodput), f"mlgoodput.{name} is not a lazy attribute (_LAZY_MODULES)"
        assert f"`{name}`" in doc, f"the package docstring does not name mlgoodput.{name}"


def test_torch_ui_and_identity_load_on_first_access() -> None:
    """In a fresh interpreter: nothing of mlgoodput loads at import; each attribute loads its
    module (and torch's integration does not import torch itself)."""
    code = (
        "import sys, mlgoodput\n"
        "before = sorted(m for m in sys.modules if m.startswith('mlgoodput.'))\n"
        "names = [mlgoodput.torch.__name__, mlgoodput.ui.__name__, mlgoodput.identity.__name__]\n"
        "print(before, *names, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "mlgoodput.torch", "mlgoodput.ui", "mlgoodput.identity", "False"]
