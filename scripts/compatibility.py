"""Generate docs/compatibility.md: every public name of each peer package against ours.

    python scripts/compatibility.py            # rewrite docs/compatibility.md
    python scripts/compatibility.py --check    # exit 1 when the page is stale

The peers (ml-goodput-measurement, google-cloud-mldiagnostics, jax-monitoring) must be
installed (`pip install -e '.[test]'`). Each has a data file in docs/compatibility/: the
module map (peer module -> ours) and the reason for each deliberate difference, keyed by
the peer's dotted name (a key ending in ".*" covers every name under it). Statuses:

- same: same kind, and for callables the same parameter names, order, kinds and defaults;
- superset: every call written for the peer works on ours (ours adds optional parameters,
  makes a required one optional, or adds enum members / dict keys);
- different: some call written for the peer means something else or fails on ours;
- missing: ours lacks the name.

Names the peer merely imports from other packages (numpy, typing, ...) are listed apart.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import enum
import importlib
import inspect
import logging
import re
import sys
import tomllib
import types
import typing
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "compatibility"
PAGE = ROOT / "docs" / "compatibility.md"

SAME, SUPERSET, DIFFERENT, MISSING = "same", "superset", "different", "missing"
_EMPTY = inspect.Parameter.empty
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


@dataclasses.dataclass(frozen=True)
class Row:
    name: str  # the peer's dotted name
    kind: str
    status: str
    notes: str
    reason: str | None


@dataclasses.dataclass
class Peer:
    distribution: str
    version: str
    require_reasons: bool
    modules: dict[str, str]
    reasons: dict[str, str]
    semantics: dict[str, str]
    seed_tests: dict[str, str]
    source: Path

    def reason(self, name: str) -> str | None:
        if name in self.reasons:
            return self.reasons[name]
        parts = name.split(".")
        for i in range(len(parts) - 1, 0, -1):
            key = ".".join(parts[:i]) + ".*"
            if key in self.reasons:
                return self.reasons[key]
        return None


def load_peers(data: Path = DATA) -> list[Peer]:
    peers = []
    for path in sorted(data.glob("*.toml")):
        d = tomllib.loads(path.read_text())
        peers.append(
            Peer(
                d["distribution"],
                d["version"],
                bool(d.get("require_reasons", True)),
                dict(d.get("modules", {})),
                dict(d.get("reasons", {})),
                dict(d.get("semantics", {})),
                dict(d.get("seed_tests", {})),
                path,
            )
        )
    return peers


def resolve(path: str) -> Any:
    """A module or attribute by dotted path: imports the root, then attributes (importing
    submodules that are not attributes yet)."""
    parts = path.split(".")
    obj: Any = _quiet_import(parts[0])
    for i, p in enumerate(parts[1:], 1):
        if not hasattr(obj, p):
            _quiet_import(".".join(parts[: i + 1]))
        obj = getattr(obj, p)
    return obj


def _quiet_import(name: str) -> Any:
    """Import a module with its warnings ignored and its prints sent to stderr: what a peer
    (or a package it pulls in, such as torch's pynvml FutureWarning) says at import must not
    change or pollute the page, nor the check's one line."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        return importlib.import_module(name)


# ------------------------------------------------------------------------------ comparing
def _clean(text: str) -> str:
    text = re.sub(r" at 0x[0-9a-f]+", "", text)
    return re.sub(r"\b[a-z_][\w.]*\.(?=[A-Z])", "", text)  # module paths before class names


def _default_repr(v: Any) -> str:
    if v is _EMPTY:
        return "required"
    if isinstance(v, datetime.datetime):
        return "datetime(...)"  # evaluated at import: differs between any two processes
    return _clean(repr(v))


def _param_kind(p: inspect.Parameter) -> str:
    return {
        inspect.Parameter.POSITIONAL_ONLY: "positional-only",
        inspect.Parameter.POSITIONAL_OR_KEYWORD: "positional",
        inspect.Parameter.VAR_POSITIONAL: "*args",
        inspect.Parameter.KEYWORD_ONLY: "keyword-only",
        inspect.Parameter.VAR_KEYWORD: "**kwargs",
    }[p.kind]


def _params(fn: Any, drop_self: bool) -> list[inspect.Parameter] | None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    ps = list(sig.parameters.values())
    if drop_self and ps and ps[0].name in ("self", "cls"):
        ps = ps[1:]
    return ps


def compare_signatures(peer: Any, ours: Any, drop_self: bool = False) -> tuple[str, str]:
    pp, op = _params(peer, drop_self), _params(ours, drop_self)
    if pp is None or op is None:
        return (SAME, "") if (pp is None) == (op is None) else (DIFFERENT, "signature not introspectable")
    wider: list[str] = []
    breaks: list[str] = []
    ppos = [p for p in pp if p.kind in _POSITIONAL]
    opos = [p for p in op if p.kind in _POSITIONAL]
    oby = {p.name: p for p in op}
    for i, p in enumerate(ppos):
        o = opos[i] if i < len(opos) else None
        if o is None or o.name != p.name:
            got = f"`{o.name}`" if o is not None else "none"
            at = oby.get(p.name)
            where = f"; ours takes `{p.name}` {_param_kind(at)}" if at is not None else ""
            breaks.append(f"positional {i + 1}: peer `{p.name}`, ours {got}{where}")
            continue
        _compare_default(p, o, wider, breaks)
    for p in pp:
        if p.kind is inspect.Parameter.KEYWORD_ONLY:
            o = oby.get(p.name)
            if o is None or o.kind not in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
                breaks.append(f"keyword `{p.name}` missing")
            else:
                _compare_default(p, o, wider, breaks)
        elif p.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD) and not any(
            o.kind is p.kind for o in op
        ):
            breaks.append(f"`{_param_kind(p)}` missing")
    pnames = {p.name for p in pp}
    extra = [
        o
        for o in op
        if o.name not in pnames and o.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ]
    for o in extra:
        if o.default is _EMPTY:
            breaks.append(f"ours requires `{o.name}`")
        else:
            wider.append(f"adds `{o.name}={_default_repr(o.default)}`")
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in pp) and any(
        o.kind is inspect.Parameter.VAR_KEYWORD for o in op
    ):
        wider.append("adds `**kwargs`")
    same_shape = [(p.name, p.kind) for p in pp] == [(o.name, o.kind) for o in op]
    if breaks:
        return DIFFERENT, "; ".join(breaks + wider)
    if wider or not same_shape:
        return SUPERSET, "; ".join(wider)
    return SAME, ""


def _compare_default(p: inspect.Parameter, o: inspect.Parameter, wider: list[str], breaks: list[str]) -> None:
    if p.kind is not o.kind and not (p.kind in _POSITIONAL and o.kind in _POSITIONAL):
        breaks.append(f"`{p.name}`: peer {_param_kind(p)}, ours {_param_kind(o)}")
    pd, od = _default_repr(p.default), _default_repr(o.default)
    if pd == od or _same_number(p.default, o.default):
        return
    if p.default is _EMPTY:
        wider.append(f"`{p.name}` optional (default {od})")
    else:
        breaks.append(f"default of `{p.name}`: peer {pd}, ours {od}")


def _same_number(a: Any, b: Any) -> bool:
    def num(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool)

    return num(a) and num(b) and float(a) == float(b)


def _enum_status(peer: type[enum.Enum], ours: Any) -> tuple[str, str]:
    if not (isinstance(ours, type) and issubclass(ours, enum.Enum)):
        return DIFFERENT, "ours is not an Enum"
    pm = {m.name: m.value for m in peer}
    om = {m.name: m.value for m in ours}
    lost = [f"`{n}`" for n in pm if n not in om]
    changed = [f"`{n}` = {om[n]!r} (peer {v!r})" for n, v in pm.items() if n in om and om[n] != v]
    added = [f"`{n}`" for n in om if n not in pm]
    if lost or changed:
        return DIFFERENT, "; ".join(
            (["lacks " + ", ".join(lost)] if lost else []) + changed + (["adds " + ", ".join(added)] if added else [])
        )
    return (SUPERSET, "adds " + ", ".join(added)) if added else (SAME, "")


def _typeddict_status(peer: Any, ours: Any) -> tuple[str, str]:
    pk, ok = set(getattr(peer, "__annotations__", {})), set(getattr(ours, "__annotations__", {}))
    if not typing.is_typeddict(ours):
        return DIFFERENT, "ours is not a TypedDict"
    if pk - ok:
        return DIFFERENT, "lacks keys " + ", ".join(f"`{k}`" for k in sorted(pk - ok))
    return (SUPERSET, "adds keys " + ", ".join(f"`{k}`" for k in sorted(ok - pk))) if ok - pk else (SAME, "")


def _kind(obj: Any) -> str:
    if inspect.ismodule(obj):
        return "module"
    if isinstance(obj, type) and issubclass(obj, enum.Enum):
        return "enum"
    if typing.is_typeddict(obj):
        return "TypedDict"
    if dataclasses.is_dataclass(obj) and isinstance(obj, type):
        return "dataclass"
    if isinstance(obj, type):
        return "class"
    if isinstance(obj, property):
        return "property"
    if callable(obj) and not isinstance(obj, (types.GenericAlias, typing._GenericAlias)):  # type: ignore[attr-defined]
        return "function"
    if isinstance(obj, (types.GenericAlias, typing._GenericAlias)):  # type: ignore[attr-defined]
        return "type alias"
    if isinstance(obj, logging.Logger):
        return "logger"
    return "constant"


def _foreign(obj: Any, root: str) -> bool:
    """An object the peer only imports from another package (numpy, typing, urllib3, ...)."""
    if inspect.ismodule(obj):
        return not obj.__name__.startswith(root + ".") and obj.__name__ != root
    if isinstance(obj, (typing._SpecialForm, typing.TypeVar)) or obj in (typing.Any, typing.TypedDict):
        return True
    mod = getattr(obj, "__module__", None)
    if isinstance(obj, (type, types.FunctionType)) and isinstance(mod, str):
        return mod.split(".")[0] != root
    return isinstance(obj, typing._SpecialGenericAlias)  # type: ignore[attr-defined]


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """Public methods and attributes a class defines (itself or a base from the same package)."""
    root = cls.__module__.split(".")[0]
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    seen: set[str] = set()
    for base in cls.__mro__:
        if base is object or base.__module__.split(".")[0] != root:
            continue
        for name, value in vars(base).items():
            if name in seen or name in fields or (name.startswith("_") and name != "__init__"):
                continue
            seen.add(name)
            yield name, value


def compare_object(name: str, peer: Any, ours: Any, root: str, rows: list[Row], p: Peer) -> None:
    kind = _kind(peer)
    if ours is _MISSING:
        rows.append(Row(name, kind, MISSING, "", p.reason(name)))
        return
    status, notes = SAME, ""
    if kind == "module":
        status, notes = (SAME, "") if inspect.ismodule(ours) else (DIFFERENT, "ours is not a module")
    elif kind == "enum":
        status, notes = _enum_status(peer, ours)
    elif kind == "TypedDict":
        status, notes = _typeddict_status(peer, ours)
    elif kind in ("class", "dataclass"):
        if not isinstance(ours, type):
            status, notes = DIFFERENT, "ours is not a class"
        else:
            if kind == "dataclass" and not dataclasses.is_dataclass(ours):
                notes = "ours is a plain class"
            elif kind == "dataclass":
                pf = {f.name for f in dataclasses.fields(peer)}
                of = {f.name for f in dataclasses.fields(ours)}
                if pf - of:
                    status, notes = DIFFERENT, "lacks fields " + ", ".join(sorted(pf - of))
                pfrozen = getattr(peer, "__dataclass_params__").frozen  # noqa: B009
                ofrozen = getattr(ours, "__dataclass_params__").frozen  # noqa: B009
                if pfrozen != ofrozen:
                    status, notes = DIFFERENT, f"frozen: peer {pfrozen}, ours {ofrozen}"
            rows.append(Row(name, kind, status, notes, p.reason(name) if status not in (SAME, SUPERSET) else None))
            for mname, mvalue in sorted(_members(peer)):
                ov = inspect.getattr_static(ours, mname, _MISSING)
                compare_member(f"{name}.{mname}", mvalue, ov, rows, p)
            return
    elif kind == "function":
        if not callable(ours):
            status, notes = DIFFERENT, "ours is not callable"
        else:
            status, notes = compare_signatures(peer, ours)
    elif kind == "logger":
        status = SAME if isinstance(ours, logging.Logger) else DIFFERENT
    elif kind == "type alias":
        pr, orr = _clean(repr(peer)), _clean(repr(ours))
        status, notes = (
            (SAME, "") if pr == orr else (SUPERSET, f"`{orr}`") if "BadputType" in pr else (DIFFERENT, f"ours `{orr}`")
        )
    else:
        if _safe_eq(peer, ours):
            status = SAME
        elif (
            isinstance(peer, dict)
            and isinstance(ours, dict)
            and all(k in ours and ours[k] == v for k, v in peer.items())
        ):
            status, notes = SUPERSET, "adds keys " + ", ".join(repr(k) for k in ours if k not in peer)
        else:
            status, notes = DIFFERENT, f"peer {_clean(repr(peer))[:80]}, ours {_clean(repr(ours))[:80]}"
    rows.append(Row(name, kind, status, notes, p.reason(name) if status in (DIFFERENT, MISSING) else None))


def _safe_eq(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def compare_member(name: str, peer: Any, ours: Any, rows: list[Row], p: Peer) -> None:
    raw_peer = peer.__func__ if isinstance(peer, (staticmethod, classmethod)) else peer
    if ours is _MISSING:
        rows.append(Row(name, "method" if callable(raw_peer) else "attribute", MISSING, "", p.reason(name)))
        return
    raw_ours = ours.__func__ if isinstance(ours, (staticmethod, classmethod)) else ours
    if isinstance(peer, property):
        ok = isinstance(ours, property) or not callable(raw_ours)
        rows.append(Row(name, "property", SAME if ok else DIFFERENT, "", None if ok else p.reason(name)))
    elif callable(raw_peer):
        if not callable(raw_ours):
            st, notes = DIFFERENT, "ours is not a method"
        else:
            st, notes = compare_signatures(raw_peer, raw_ours, drop_self=not isinstance(peer, staticmethod))
        rows.append(Row(name, "method", st, notes, p.reason(name) if st == DIFFERENT else None))
    else:
        st = SAME if _safe_eq(peer, ours) else DIFFERENT
        rows.append(
            Row(
                name,
                "attribute",
                st,
                "" if st == SAME else f"peer {_clean(repr(peer))[:60]}",
                p.reason(name) if st == DIFFERENT else None,
            )
        )


_MISSING: Any = object()


def compare_peer(p: Peer) -> tuple[list[Row], dict[str, list[str]]]:
    rows: list[Row] = []
    imports: dict[str, list[str]] = {}
    for pmod_name, omod_name in p.modules.items():
        root = pmod_name.split(".")[0]
        pmod = resolve(pmod_name)
        try:
            omod = resolve(omod_name)
        except (ImportError, AttributeError):
            omod = _MISSING
        for name in sorted(n for n in dir(pmod) if not n.startswith("_")):
            obj = getattr(pmod, name)
            if _foreign(obj, root):
                imports.setdefault(pmod_name, []).append(name)
                continue
            ours = _MISSING if omod is _MISSING else getattr(omod, name, _MISSING)
            compare_object(f"{pmod_name}.{name}", obj, ours, root, rows, p)
    return rows, imports


# ------------------------------------------------------------------------------ the page
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(peers: list[Peer]) -> str:
    out = [
        "# Compatibility with the libraries mlgoodput replaces",
        "",
        "Generated by `python scripts/compatibility.py` from the installed peer packages and the",
        "reasons in `docs/compatibility/*.toml`; `tests/compat/test_compatibility_page.py` fails when this",
        "page is stale. Statuses: **same** (names, order, kinds and defaults), **superset** (every",
        "call written for the peer works; ours adds optional parameters, members or keys),",
        "**different** (a call written for the peer means something else or fails; the reason",
        "says why), **missing** (ours lacks the name; the reason says what to use instead).",
        "Return shapes are not introspectable: the ported peer tests check them",
        "(`tests/compat/`).",
        "",
    ]
    for p in peers:
        rows, imports = compare_peer(p)
        counts = {s: sum(1 for r in rows if r.status == s) for s in (SAME, SUPERSET, DIFFERENT, MISSING)}
        out += [
            f"## {p.distribution} {p.version}",
            "",
            "Modules: " + ", ".join(f"`{k}` → `{v}`" for k, v in p.modules.items()) + ".",
            "",
            "Names: " + ", ".join(f"{n} {s}" for s, n in counts.items()) + f" (of {len(rows)}).",
            "",
            "| name | kind | status | notes | reason |",
            "| --- | --- | --- | --- | --- |",
        ]
        for r in rows:
            status = r.status
            if status in (DIFFERENT, MISSING):
                status += " (on purpose)" if r.reason else " (**no reason yet**)"
            out.append(f"| `{r.name}` | {r.kind} | {status} | {_cell(r.notes)} | {_cell(r.reason or '')} |")
        if p.semantics:
            out += ["", "### Same name, other meaning", ""]
            out += [f"- **{k}**: {v}" for k, v in p.semantics.items()]
        if p.seed_tests:
            out += _render_seed_tests(p)
        if imports:
            out += [
                "",
                "Imported from other packages, not part of the API (not compared): "
                + "; ".join(f"`{m}`: " + ", ".join(f"`{n}`" for n in names) for m, names in imports.items())
                + ".",
            ]
        out.append("")
    return "\n".join(out)


def _render_seed_tests(p: Peer) -> list[str]:
    passed = sorted(k for k, v in p.seed_tests.items() if v == "pass")
    differ = sorted((k, v.split(":", 1)[1].strip()) for k, v in p.seed_tests.items() if v.startswith("differs:"))
    skipped = sorted((k, v.split(":", 1)[1].strip()) for k, v in p.seed_tests.items() if v.startswith("not ported:"))
    out = [
        "",
        f"### {p.distribution}'s own tests",
        "",
        "Run against mlgoodput with only their imports changed, loaded from the installed package",
        f"(`tests/compat/test_seed_suite.py`): {len(passed)} pass, {len(differ)} fail on a deliberate",
        f"difference (the test asserts that they fail), {len(skipped)} are not public-API cases.",
        "",
        "Pass: " + ", ".join(f"`{k}`" for k in passed) + ".",
        "",
        "| case | differs because |",
        "| --- | --- |",
    ]
    out += [f"| `{k}` | {_cell(v)} |" for k, v in differ]
    out += ["", "| not ported | why |", "| --- | --- |"]
    out += [f"| `{k}` | {_cell(v)} |" for k, v in skipped]
    return out


def unexplained(p: Peer) -> list[Row]:
    rows, _ = compare_peer(p)
    return [r for r in rows if r.status in (DIFFERENT, MISSING) and not r.reason]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/compatibility.md is stale")
    args = ap.parse_args(argv)
    logging.disable(logging.WARNING)  # the peers log at import
    text = render(load_peers())
    if args.check:
        if not PAGE.exists() or PAGE.read_text() != text:
            print("docs/compatibility.md is stale: run `python scripts/compatibility.py`", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
