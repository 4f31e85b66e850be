"""Many clients at once, the store helper killed mid-run: every record is stored exactly once,
counted one by one (stored == sent, never one more, never one less)."""

from __future__ import annotations

import collections
import os
import subprocess
import sys

import pytest

from waiting import wait_for

from .conftest import child_env, stored_logs

CLIENT = r"""
import logging, sys
import mlgoodput.console as C
C.connect(sys.argv[1])
log = logging.getLogger("count")
me, n = sys.argv[2], int(sys.argv[3])
for i in range(n):
    log.info("rec %s %d", me, i)
print("delivered", C.disconnect(timeout_s=120), flush=True)
"""


@pytest.mark.slow
def test_many_clients_and_a_store_restart_store_each_record_exactly_once(sockdir: str) -> None:
    import mlgoodput.console as C
    from mlgoodput.console._storeproc import StoreProcess

    store, clients, n = f"{sockdir}/store.db", 6, 4000
    address = f"unix:{sockdir}/x.sock"
    with C.session(address, job="count", store=store, display=False, store_process=True) as srv:
        assert isinstance(srv.sink, StoreProcess)
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", CLIENT, address, str(k), str(n)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=child_env(),
                text=True,
            )
            for k in range(clients)
        ]
        wait_for(lambda: srv.sink.stored_events > 2000, timeout_s=60, what="records stored")
        proc = srv.sink._proc
        assert proc is not None
        # out of the terminal's process group: a Ctrl-C while it starts must not reach it
        assert os.getpgid(proc.pid) != os.getpgid(0)
        proc.kill()  # the store helper dies with batches in flight: they are given to a new one
        outs = [p.communicate(timeout=180)[0] for p in procs]
        assert all("delivered True" in o for o in outs), outs
        assert srv.sink.restarts >= 1
    rows = [r for r in stored_logs(store, "count") if r["logger"] == "count"]
    seen = collections.Counter(tuple(r["message"].split()[1:]) for r in rows)
    want = {(str(k), str(i)) for k in range(clients) for i in range(n)}
    assert set(seen) == want  # none lost
    assert [c for c in seen.values() if c != 1] == []  # none twice
    assert len(rows) == clients * n
