"""Environment variables that configure mlgoodput, and the built-in defaults behind them.

Every name is read when an object is built, never at import, and every one is also a
keyword argument (`store=`, ...), which wins over the environment.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Store URL or path used when `store=None` (`sqlite:///abs/path.db`, `/path/x.db`, `memory://name`).
STORE = "MLGOODPUT_STORE"
#: Directory of the local journals that hold events until they are in the store.
JOURNAL_DIR = "MLGOODPUT_JOURNAL_DIR"
#: Address of a live console server that processes join (see mlgoodput.console).
CONSOLE = "MLGOODPUT_CONSOLE"
#: Token for a console server on TCP.
CONSOLE_TOKEN = "MLGOODPUT_CONSOLE_TOKEN"
#: Usage sampling interval in seconds for console clients (set by `Usage.enable`; unset: off).
CONSOLE_USAGE = "MLGOODPUT_CONSOLE_USAGE"


def data_dir() -> Path:
    """Where mlgoodput keeps its files by default: $XDG_DATA_HOME/mlgoodput or ~/.local/share/mlgoodput."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "mlgoodput"


def default_store_url() -> str:
    """$MLGOODPUT_STORE, else the SQLite file `mlgoodput.db` in `data_dir()`."""
    return os.environ.get(STORE) or "sqlite://" + str(data_dir() / "mlgoodput.db")
