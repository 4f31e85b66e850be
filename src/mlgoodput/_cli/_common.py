"""What every subcommand shares: its error type and opening a store for reading."""

from __future__ import annotations

import argparse
import os
from typing import Any


class CLIError(Exception):
    """A failure the command explains in one line; `exit_code` is what the process returns."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def positive_seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}") from None
    if not (v > 0 and v != float("inf")):
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, got {text!r}")
    return v


def open_read_store(value: str | None, arg: str = "--store", *, recover: bool = True) -> Any:
    """The store at `value` for a command that only reads: it must exist (creating nothing).

    A SQLite file that is missing is an error, unless journals of it are waiting (then the
    store is created to receive them, which is what recording would have done). With
    `recover`, journals that killed processes left behind are shipped first, so the
    command sees every event recorded so far. A store that cannot be reached is a
    one-line error naming it.
    """
    from mlgoodput._recovery import journal_dirs, recover_changed_journals
    from mlgoodput.store import StoreError, open_store, resolve_store_url, store_file

    url = resolve_store_url(value, arg)
    path = store_file(url)
    if path is not None:
        pending = [d for d in journal_dirs(url) if _has_files(d)]
        if os.path.isdir(path):
            raise CLIError(f"{arg}: {path} is a directory, not a store file (pass a .db file or a URL)", 2)
        if not os.path.exists(path) and not pending:
            where = "the default store" if value is None else arg
            raise CLIError(
                f"no store at {path} ({where}): nothing has been recorded there yet;"
                " record a job first, or pass --store / set MLGOODPUT_STORE to the store of your jobs"
            )
    store = open_store(url, arg)
    try:
        store.jobs()  # reach it now, so a broken store fails here with one clear line
        if recover:
            recover_changed_journals(store)
    except StoreError as e:
        store.close()
        raise CLIError(f"{e} (check {arg} or MLGOODPUT_STORE)") from e
    return store


def _has_files(d: Any) -> bool:
    try:
        return any(os.scandir(d))
    except OSError:
        return False


def rich_console(**kwargs: Any) -> Any:
    """A rich Console whose closed pipe (`mlgoodput report | head`) ends the command as a
    BrokenPipeError (a clean exit in `cli.main`) instead of rich's exit code 1."""
    from rich.console import Console

    def broken_pipe() -> None:
        raise BrokenPipeError

    con = Console(**kwargs)
    con.on_broken_pipe = broken_pipe  # type: ignore[method-assign]
    return con
