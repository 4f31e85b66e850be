"""Misuse on the training path: warn once per kind, never raise (unless strict).

A call from a training loop must not crash the job because of the order or the value of
its events (an end without a start, a duplicate, a step number going back, a time that
is not a time). Such a call records what it can and reports the problem here: once per
kind and owner, as an `MlGoodputWarning` and a log line naming the call, the argument and
the value. Strict mode (`strict=True`, or `MLGOODPUT_STRICT=1` when `strict=None`) raises
`MlGoodputMisuseError` instead, for users' own tests.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Hashable

from mlgoodput import _env
from mlgoodput._once import Once

__all__ = [
    "MisuseReporter",
    "MlGoodputMisuseError",
    "MlGoodputWarning",
    "first_warning",
    "misuse",
    "reset_warned",
    "resolve_strict",
    "shown",
]

log = logging.getLogger("mlgoodput")


class MlGoodputWarning(UserWarning):
    """A call from the training path was misused; mlgoodput recorded what it could."""


class MlGoodputMisuseError(ValueError):
    """Strict mode: a misuse that would otherwise be a warning (a ValueError, so either catches it)."""


def shown(value: object) -> str:
    """`repr(value)` for a warning: a long one cut short, and never raising (a repr that
    fails, or an int too long to print, is named by its type instead)."""
    try:
        text = repr(value)
    except Exception:
        return f"<{type(value).__name__} that cannot be shown>"
    return text if len(text) <= 100 else f"{text[:60]}... ({len(text)} characters)"


def resolve_strict(strict: object, arg: str = "strict") -> bool:
    """`strict` as a bool: None reads $MLGOODPUT_STRICT ("1", "true", "yes" or "on" enable it)."""
    if strict is None:
        raw = os.environ.get(_env.STRICT, "").strip().lower()
        return raw in ("1", "true", "yes", "on")
    if not isinstance(strict, bool):
        raise TypeError(f"{arg} must be a bool or None, got {strict!r}")
    return strict


class MisuseReporter:
    """Reports misuse for one owner (a recorder, a monitor): each kind is warned once;
    `counts` keeps how often each kind happened."""

    __slots__ = ("_once", "owner", "strict")

    def __init__(self, owner: str, strict: bool) -> None:
        self.owner = owner
        self.strict = strict
        self._once = Once()

    @property
    def counts(self) -> dict[str, int]:
        """How often each kind of misuse happened (a copy)."""
        return {str(k): n for k, n in self._once.counts().items()}

    def report(self, kind: str, call: str, arg: str, value: object, what: str) -> None:
        """`call(arg=value)`: `what` happened (and what mlgoodput did about it)."""
        text = f"{self.owner}.{call}({arg}={shown(value)}): {what}"
        if self.strict:
            raise MlGoodputMisuseError(text + f" [strict mode; misuse kind {kind!r}]")
        if not self._once.first(kind):
            return
        # one message, not two: the warning (filterable by category; logging shows it too
        # where logging.captureWarnings is on), never a log line besides it
        warnings.warn(
            f"{text} (misuse kind {kind!r}; warned once per kind)", MlGoodputWarning, stacklevel=user_stacklevel()
        )


_warned = Once()  # what module-level calls warned about, in this process


def first_warning(key: Hashable) -> bool:
    """Count one occurrence of a process-wide warning `key`; True the first time (after
    `reset_warned()`, again). For warnings that have no owner object (a launcher's variable)."""
    return _warned.first(key)


def misuse(
    call: str,
    argument: str,
    value: object,
    message: str,
    *,
    strict: bool | None = None,
    kind: str | None = None,
) -> None:
    """Report misuse of `call(argument=value)` by a module-level call (no owner object).

    Warns (one `MlGoodputWarning`) once per (call, kind), `kind` defaulting to
    the argument's name. Strict mode (`strict=True`, or `$MLGOODPUT_STRICT` when None)
    raises `MlGoodputMisuseError`, a ValueError, instead.
    """
    text = f"{call}({argument}={shown(value)}): {message}"
    k = kind if kind is not None else argument
    if resolve_strict(strict):
        raise MlGoodputMisuseError(text + f" [strict mode; misuse kind {k!r}]")
    if not _warned.first((call, k)):
        return
    warnings.warn(f"{text} (misuse kind {k!r}; warned once per kind)", MlGoodputWarning, stacklevel=user_stacklevel())


_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_stacklevel() -> int:
    """The `stacklevel` that points a warning at the first caller outside mlgoodput."""
    level = 1
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
        f = f.f_back  # type: ignore[assignment]
        level += 1
    return level


def reset_warned() -> None:
    """Forget which kinds `misuse` and `first_warning` have warned about (tests use it to see
    each warning again)."""
    _warned.reset()
