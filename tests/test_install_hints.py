"""Every install hint in the code names an extra that exists and really holds the package
the hint is about (`[all]` leaves torch out, for one)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from mlgoodput import cli

ROOT = Path(__file__).resolve().parents[1]
_HINT = re.compile(r"mlgoodput\[(\w+)\]")
#: "X needs PACKAGE ...: pip install 'mlgoodput[EXTRA]' [MORE PACKAGES]"
_NEEDS = re.compile(r"needs ([A-Za-z][\w.-]*)[^'\"]*?pip install 'mlgoodput\[(\w+)\]'([^\"\n]*)")
#: how the messages name a package -> its distribution's name
_ALIASES = {"pytorch": "torch", "orbax": "orbax-checkpoint", "the": None}


def _extras() -> dict[str, set[str]]:
    raw = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    def names(extra: str) -> set[str]:
        out: set[str] = set()
        for req in raw[extra]:
            m = re.fullmatch(r"mlgoodput\[([\w,]+)\]", req)
            if m:
                for e in m.group(1).split(","):
                    out |= names(e)
            else:
                out.add(re.split(r"[\[<>=!~; ]", req, maxsplit=1)[0].lower().replace("_", "-"))
        return out

    return {e: names(e) for e in raw}


def _sources() -> list[tuple[Path, str]]:
    return [(p, p.read_text(encoding="utf-8")) for p in sorted((ROOT / "src" / "mlgoodput").rglob("*.py"))]


def test_every_hint_names_an_extra_that_holds_its_package() -> None:
    extras = _extras()
    checked = 0
    for path, text in _sources():
        flat = re.sub(r'"\s*\n\s*f?"', "", text)  # strings split over lines read as one
        for m in _HINT.finditer(flat):
            assert m.group(1) in extras, f"{path.name}: no extra [{m.group(1)}]"
        for m in _NEEDS.finditer(flat):
            word = m.group(1).lower().rstrip(".:").replace("_", "-")
            pkg = _ALIASES.get(word, word)
            if pkg is None:
                continue
            named = extras[m.group(2)] | set(m.group(3).split())
            assert pkg in named, f"{path.name}: {m.group(0)!r}: [{m.group(2)}] lacks {pkg}"
            checked += 1
    assert checked >= 15  # the hints of the exporters, stores, console, diagnostics, jax and torch


def test_all_leaves_torch_out_and_a_named_extra_is_kept() -> None:
    assert "torch" not in _extras()["all"]
    text, code = cli.describe_error(ImportError("the torch demo needs PyTorch: pip install 'mlgoodput[torch]'"))
    assert text == "the torch demo needs PyTorch: pip install 'mlgoodput[torch]'" and code == cli.EXIT_FAILURE
    text, _ = cli.describe_error(ImportError("No module named 'x'"))
    assert "mlgoodput[all]" in text and "all but torch" in text
