"""How a Sample's name becomes each backend's metric name (documented in docs/exporting.md).

A Sample name is a slash path that may hold `{label}` placeholders, for example
`badput/{bucket}_seconds` with `labels={"bucket": "program_startup", ...}`:

- TensorBoard tag: placeholders filled in (`badput/program_startup_seconds`); labels that
  are neither placeholders nor identity labels (`job_name`, `logger_name`) are appended as
  `/key=value`, so different label sets never share a tag.
- Family (Prometheus, OTLP, Cloud Monitoring custom metrics): placeholders and their
  following separator removed, a group name repeated at the start of the next part said once
  (`goodput/goodput_pct` -> `goodput_pct`), `/` joined with `_`; the labels stay labels.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: Labels that say which job a sample belongs to; TensorBoard keeps one logdir per job instead.
IDENTITY_LABELS: frozenset[str] = frozenset({"job_name", "logger_name"})

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BAD_CHARS = re.compile(r"[^A-Za-z0-9_]")


def placeholders(name: str) -> list[str]:
    """The label names a Sample name refers to."""
    return list(placeholder_names(name))


_NAMED: dict[str, tuple[str, ...]] = {}  # name -> its placeholders (an upload repeats its names)


def placeholder_names(name: str) -> tuple[str, ...]:
    """`placeholders(name)` as a tuple, remembered per name (an upload repeats its names)."""
    got = _NAMED.get(name)
    if got is None:
        got = tuple(_PLACEHOLDER.findall(name))
        if len(_NAMED) >= 10_000:  # names come and go: keep it bounded
            _NAMED.clear()
        _NAMED[name] = got
    return got


def check_name(name: str, labels: Mapping[str, str]) -> None:
    """Raise ValueError if `name` refers to a label that `labels` lacks."""
    missing = [k for k in placeholder_names(name) if k not in labels]
    if missing:
        raise ValueError(f"sample name {name!r} needs labels {missing!r}, got {dict(labels)!r}")


def tensorboard_tag(name: str, labels: Mapping[str, str]) -> str:
    """The TensorBoard tag of a sample (placeholders filled, other labels appended)."""
    used = set(placeholders(name))
    tag = _PLACEHOLDER.sub(lambda m: _tag_part(labels[m.group(1)]), name)
    extra = [f"{k}={_tag_part(v)}" for k, v in sorted(labels.items()) if k not in used and k not in IDENTITY_LABELS]
    return "/".join([tag, *extra])


def family(name: str) -> str:
    """The backend-neutral metric family: `badput/{bucket}_seconds` -> `badput_seconds`."""
    bare = _PLACEHOLDER.sub("\0", name)
    bare = re.sub(r"\0[_/]?", "", bare)
    parts = [p for p in bare.split("/") if p]
    out: list[str] = []
    for p in parts:
        if out and p.startswith(out[-1] + "_") and len(out) == 1:
            out[-1] = p
        else:
            out.append(p)
    return _BAD_CHARS.sub("_", "_".join(out)).strip("_") or "value"


def label_name(key: str) -> str:
    """A label key every backend accepts (letters, digits, underscores; not starting with a digit)."""
    k = _BAD_CHARS.sub("_", key)
    return "_" + k if k[:1].isdigit() else k


def _tag_part(value: str) -> str:
    return str(value).replace("/", "_").lower()
