"""Helpers for the web UI tests: the public scenarios in a store, a GET that returns JSON."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from mlgoodput.events import EventBatch
from mlgoodput.store import SQLiteStore
from timelines import DATA, Timeline, load

PUBLIC = ["s1_clean_run", "s2_custom_and_async_data", "s3_checkpoint_save_restore", "s4_disruption_restart"]


def scenario(name: str) -> Timeline:
    return load(DATA / f"{name}.jsonl")


def fill(store: SQLiteStore, tl: Timeline, logger: str | None = None) -> str:
    logger = logger or f"goodput_{tl.job_name}"
    store.append(logger, tl.job_name, EventBatch(abs(hash(tl.job_name)) % 1_000_000 + 1, 0, tl.events))
    return logger


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, Any, dict[str, str]]:
    """(status, parsed JSON or text, headers) of a GET."""
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            body, status, hdrs = r.read(), r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        body, status, hdrs = e.read(), e.code, dict(e.headers)
    text = body.decode()
    try:
        return status, json.loads(text), hdrs
    except ValueError:
        return status, text, hdrs
