"""The fleet page's data (`/api/fleet`): one `FleetSource` per served store, asked for a time
range and a grouping, answering with its `FleetReport.to_dict()` unchanged (the page draws
those numbers and computes none of its own: the screen is the report, as `mlgoodput fleet
--json` prints it).

The query's parameters are checked here and refused with one line (`ValueError`, a 400 to the
page): `since` and `until` as ISO 8601 dates or times (without a zone: UTC, the zone of every
page) or UNIX seconds, `by` a label or `job`, `price_per_hour` a number >= 0, `top` the most
job rows sent. Their defaults are the command's: the last 7 days up to now (from the start of
that hour), by team.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from mlgoodput.accounting import FleetSource, Prices, job_link, parse_utc_time

__all__ = ["DEFAULT_BY", "DEFAULT_DAYS", "FleetQuery", "FleetView", "job_link", "parse_query"]

DEFAULT_DAYS = 7  # `mlgoodput fleet`'s default range
DEFAULT_BY = "team"
MAX_BY_CHARS = 200


@dataclass(frozen=True, slots=True)
class FleetQuery:
    """One fleet question: the range, the grouping, the price and how many job rows to send
    (None: every job)."""

    since: float
    until: float
    by: str
    price_per_hour: float | None
    top: int | None


def _first(q: Mapping[str, list[str]], name: str) -> str | None:
    raw = q.get(name, [None])[0]
    return None if raw is None or raw.strip() == "" else raw.strip()


def parse_query(q: Mapping[str, list[str]], now: float) -> FleetQuery:
    """The fleet question of a request's query string; ValueError (one line) when it is wrong."""
    raw_until, raw_since = _first(q, "until"), _first(q, "since")
    until = parse_utc_time(raw_until, "until") if raw_until is not None else now
    if raw_since is not None:
        since = parse_utc_time(raw_since, "since")
    else:
        since = math.floor((until - DEFAULT_DAYS * 86400.0) / 3600.0) * 3600.0
    if not until > since:
        raise ValueError(f"until must be after since (got since={since!r}, until={until!r})")
    by = _first(q, "by") or DEFAULT_BY
    if len(by) > MAX_BY_CHARS or any(ord(c) < 32 for c in by):
        raise ValueError(f"by must be a label name (at most {MAX_BY_CHARS} printable characters) or `job`")
    price: float | None = None
    raw_price = _first(q, "price_per_hour")
    if raw_price is not None:
        try:
            price = float(raw_price)
        except ValueError:
            raise ValueError(f"price_per_hour must be a number, got {raw_price[:60]!r}") from None
        if not (math.isfinite(price) and price >= 0):
            raise ValueError(f"price_per_hour must be a finite number >= 0, got {raw_price[:60]!r}")
    top: int | None = None
    raw_top = _first(q, "top")
    if raw_top is not None:
        try:
            top = int(raw_top)
        except ValueError:
            raise ValueError(f"top must be an integer, got {raw_top[:60]!r}") from None
        if top < 0:
            raise ValueError(f"top must be >= 0, got {top}")
    return FleetQuery(since, until, by, price, top)


class FleetView:
    """The fleet of one served store: one `FleetSource` for the server's life (each answer
    re-makes only the summaries of jobs with something new)."""

    def __init__(self, store: Any, *, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.source = FleetSource(store, clock=clock)

    def answer(self, query: FleetQuery) -> dict[str, Any]:
        """`FleetReport.to_dict()` for the query; with `top`, the first `top` job rows (most
        hours lost first) and `jobs_total`, the number of jobs in the range."""
        prices = Prices(default=query.price_per_hour)
        r = self.source.report(query.since, query.until, query.by, prices, job_link)
        out = r.to_dict()
        if query.top is not None:
            out["jobs_total"] = len(out["jobs"])
            out["jobs"] = out["jobs"][: query.top]
        return out
