"""Progress throttling, joining through the environment, and named sockets."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import mlgoodput.console as C
from mlgoodput.console import ConsoleServer, Progress
from mlgoodput.console._replay import read_job
from mlgoodput.events import Kind
from mlgoodput.store import open_store
from waiting import wait_for

from .conftest import child_env, stored_logs


def test_a_bar_sends_about_ten_updates_a_second_and_the_final_count(sockdir: str) -> None:
    store = f"{sockdir}/store.db"
    with C.session(f"unix:{sockdir}/s.sock", job="thr", store=store, display=False) as srv:
        t0 = time.monotonic()
        with Progress.new(total=20_000, msg="fast bar") as bar:
            for _ in range(20_000):
                bar.advance(1)
                if bar.completed % 1000 == 0:
                    time.sleep(0.01)
        elapsed = time.monotonic() - t0
        bar2 = Progress.new(total=5, msg="slow bar")
        bar2.update(3)  # held back (too soon after the first update), then sent by the sender thread
        held = wait_for(
            lambda: next((b for b in srv.bars.values() if b.desc == "slow bar" and b.completed == 3), None),
            10,
            what="the held-back update",
        )
        assert not held.done
        bar2.close()
    st = open_store(store)
    cols = read_job(st, "thr")
    st.close()
    updates = [cols.values[i] for i in range(len(cols)) if cols.kinds[i] == Kind.PROGRESS and cols.name(i) == bar.bar]
    assert updates[-1] == 20_000  # the exact final count
    assert len(updates) <= 10 * elapsed + 3  # at most ~10 a second (+ the first and the last)


ENV_CLIENT = r"""
import logging
import mlgoodput.console as C
c = C.connect()   # the address and the token come from the environment
logging.getLogger("env").info("joined through the environment as #%s", "?")
C.disconnect(timeout_s=10)
"""


def test_connect_reads_the_environment_and_tcp_token(sockdir: str) -> None:
    srv = ConsoleServer("127.0.0.1:0", job="env", store=f"{sockdir}/store.db", display=False)
    address = srv.start()
    try:
        env = child_env()
        env["MLGOODPUT_CONSOLE"] = address
        env["MLGOODPUT_CONSOLE_TOKEN"] = srv.token or ""
        r = subprocess.run([sys.executable, "-c", ENV_CLIENT], env=env, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    finally:
        srv.stop()
    assert [x["message"] for x in stored_logs(f"{sockdir}/store.db", "env")] == ["joined through the environment as #?"]


def test_a_bare_name_is_a_private_unix_socket(sockdir: str) -> None:
    name = f"mlgc-test-{os.getpid()}"
    srv = ConsoleServer(name, job="named", store=f"{sockdir}/store.db", display=False)
    address = srv.start()
    try:
        assert address.startswith("unix:") and address.endswith(f"/{name}.sock")
        path = address[5:]
        assert os.stat(path).st_mode & 0o777 == 0o600
        assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
        c = C.connect(name)  # the same name reaches it
        assert c.drain(5)
        deadline = time.monotonic() + 10
        while c.process is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert c.process == 0
    finally:
        C.disconnect(timeout_s=5)
        srv.stop()
    assert not os.path.exists(path)  # removed when the server stops
