"""Where a run's events go: the process's durable journal for the run's stream.

`open_sink` returns the shared `Journal` for (store, `mlgoodput.run`, run name, host); the
hot path appends to it and the journal's thread ships to the store (see mlgoodput._journal).
"""

from __future__ import annotations

from mlgoodput._journal import Journal
from mlgoodput.store import Store

NAMESPACE = "mlgoodput.run"


def open_sink(store: Store, job: str, host: int) -> Journal:
    """The journal for this run's stream (shared by every writer of it in this process)."""
    return Journal.for_stream(store, NAMESPACE, job, host)
