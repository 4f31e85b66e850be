"""A server killed in the middle of a run and started again: the client resends, nothing is lost."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from waiting import wait_for

from .conftest import child_env, stored_logs

CLIENT = r"""
import logging, sys, time
import mlgoodput.console as C
C.connect(sys.argv[1])
log = logging.getLogger("steady")
for i in range(int(sys.argv[2])):
    log.info("record %d", i)
    time.sleep(0.001)
c = C.current_client()
print("client done", flush=True)
ok = C.disconnect(timeout_s=60)
print("delivered", ok, "connects", c.connects, "dropped", c.dropped, flush=True)
"""


def _serve(address: str, store: str, out: str) -> subprocess.Popen[bytes]:
    with open(out, "ab") as f:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mlgoodput.console",
                "serve",
                "--address",
                address,
                "--job",
                "restart",
                "--store",
                store,
            ],
            stdout=f,
            stderr=subprocess.STDOUT,
            env=child_env(),
        )


@pytest.mark.slow
def test_server_killed_and_restarted_loses_nothing(sockdir: str) -> None:
    address, store, out = f"unix:{sockdir}/r.sock", f"{sockdir}/store.db", f"{sockdir}/server.out"
    n = 3000
    srv = _serve(address, store, out)
    try:
        wait_for(lambda: os.path.exists(address[5:]), what="the server socket")
        client = subprocess.Popen(
            [sys.executable, "-c", CLIENT, address, str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=child_env(),
            text=True,
        )
        wait_for(lambda: len(stored_logs(store, "restart")) > 300, what="records stored before the crash")
        srv.send_signal(signal.SIGKILL)  # a crash: whatever it had not stored is not acknowledged
        srv.wait(10)
        time.sleep(0.5)  # the client keeps logging into its buffer meanwhile
        srv = _serve(address, store, out)
        text, _ = client.communicate(timeout=120)
        assert "client done" in text and "delivered True connects 2 dropped 0" in text, text
    finally:
        srv.send_signal(signal.SIGINT)
        srv.wait(20)
    rows = [r for r in stored_logs(store, "restart") if r["logger"] == "steady"]
    got = [int(r["message"].split()[1]) for r in rows]
    assert sorted(got) == list(range(n))  # every record, each exactly once
    assert {r["process"] for r in rows} == {0}  # the restarted server kept the short id


@pytest.mark.slow
def test_store_helper_process_killed_mid_run_loses_nothing(sockdir: str) -> None:
    import logging

    import mlgoodput.console as C

    store = f"{sockdir}/store.db"
    with C.session(f"unix:{sockdir}/s.sock", job="helper", store=store, display=False, store_process=True) as srv:
        from mlgoodput.console._storeproc import StoreProcess

        assert isinstance(srv.sink, StoreProcess)
        log = logging.getLogger("helper")
        for i in range(2000):
            log.info("line %d", i)
        wait_for(lambda: srv.sink.stored_events > 100, what="the helper storing")
        proc = srv.sink._proc
        assert proc is not None
        proc.kill()  # the helper dies with records in flight
        for i in range(2000, 4000):
            log.info("line %d", i)
        assert C.disconnect(timeout_s=60)
        assert srv.sink.restarts >= 1
    got = [int(r["message"].split()[1]) for r in stored_logs(store, "helper") if r["logger"] == "helper"]
    assert sorted(got) == list(range(4000))
