"""Removing one demo job from the demos' SQLite store, so that a demo run again starts its
job afresh without touching the other demos' jobs.

It works on the store file directly (the store protocol has no removal: stores are
append-only for every real job) and only ever on the demo's own store.
"""

from __future__ import annotations

import json
import re
import sqlite3

from mlgoodput.store import store_file

#: what `machinelearning_run` appends to a run's name (the demo's workload id is its job)
_RUN_SUFFIX = re.compile(r"-(?:[0-9a-f]{8}|[0-9]{8}-[0-9]{6}-[0-9a-f]{4})$")


def _is_jobs(name: str, job: str) -> bool:
    """Whether a stream or saved-state name belongs to `job`: the job itself, its ML run
    (`job-<suffix>`), or a saved state keyed by `[logger, job]`."""
    if name == job or (name.startswith(job) and _RUN_SUFFIX.fullmatch(name[len(job) :])):
        return True
    if name.startswith("["):
        try:
            key = json.loads(name)
        except ValueError:
            return False
        return isinstance(key, list) and bool(key) and key[-1] == job
    return False


def forget_job(url: str, job: str) -> int:
    """Delete every stream and saved state of `job` from the SQLite store at `url`; returns
    how many streams went (0 when the file or the job is not there)."""
    path = store_file(url)
    if path is None:
        return 0
    try:
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=30)
    except sqlite3.OperationalError:  # no store yet
        return 0
    try:
        with conn:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "streams" not in tables:
                return 0
            streams = [(ns, j) for ns, j in conn.execute("SELECT ns, job FROM streams") if _is_jobs(j, job)]
            for ns, j in streams:
                conn.execute("DELETE FROM chunks WHERE ns = ? AND job = ?", (ns, j))
                conn.execute("DELETE FROM streams WHERE ns = ? AND job = ?", (ns, j))
            for table in ("states", "state_pieces"):
                if table in tables:
                    for ns, j in conn.execute(f"SELECT DISTINCT ns, job FROM {table}").fetchall():
                        if _is_jobs(j, job):
                            conn.execute(f"DELETE FROM {table} WHERE ns = ? AND job = ?", (ns, j))
        return len(streams)
    finally:
        conn.close()
