"""Opening one new SQLite file from many processes at once: every opener gets a store.

Switching a fresh file to WAL takes an exclusive lock, and SQLite answers "database is
locked" at once (its busy handler does not run) to the processes that lose that race.
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

import pytest

from mlgoodput.store import open_store


def _open_when_told(url: str, go: mp.synchronize.Event, out: mp.Queue[str]) -> None:
    go.wait(30)
    try:
        open_store(url).jobs()
        out.put("ok")
    except Exception as e:  # the test reports what went wrong
        out.put(f"{type(e).__name__}: {e}")


@pytest.mark.slow
@pytest.mark.forks
def test_many_processes_open_a_new_file_together(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    for trial in range(12):
        url = f"sqlite:///{tmp_path}/t{trial}.db"
        go, out = ctx.Event(), ctx.Queue()
        procs = [ctx.Process(target=_open_when_told, args=(url, go, out)) for _ in range(12)]
        for p in procs:
            p.start()
        go.set()
        answers = [out.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(30)
        assert answers == ["ok"] * len(procs), answers
        st = open_store(url)
        assert st.jobs() == []
        st.close()
