"""This process's console client: one slot, set by `_api.connect`/`disconnect` and read by
progress bars and usage sampling (which `_api` itself starts, so they cannot import it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mlgoodput.console._client import ConsoleClient

client: ConsoleClient | None = None


def current_client() -> ConsoleClient | None:
    """The connected client of this process, or None."""
    return client
