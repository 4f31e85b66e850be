"""The web UI serves a run's profile files, and nothing else: a store any host can write
names the files, but only files under the configured profile directories (symbolic links
and `..` resolved), ending like a trace and under the size cap, are sent, in pieces."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from ui_helpers import get

from mlgoodput.diagnostics import load_run
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore
from mlgoodput.ui import ProfileFiles
from waiting import wait_for

RUN_NS = "mlgoodput.run"


def _run_with_files(store: SQLiteStore, run: str, path: str, files: list[str], **extra: Any) -> None:
    """A run whose one profile session lists `files` (as a writer of the store could)."""
    t = time.time()
    evs = [
        Event(Kind.RUN_START, t, 0, attrs={"profile_dir": os.path.dirname(path), "system": {"pid": 1}}),
        Event(Kind.PROFILE_START, t + 1, 0, name="s", attrs={"session": "s", "path": path, "trigger": "programmatic"}),
        Event(
            Kind.PROFILE_STOP,
            t + 2,
            0,
            value=1.0,
            name="s",
            attrs={"session": "s", "path": path, "files": files, **extra},
        ),
    ]
    store.append(RUN_NS, run, EventBatch(abs(hash(run)) % (1 << 60) + 1, 0, evs))


def _status(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture
def attack(tmp_path: Path, store: SQLiteStore) -> tuple[Path, list[str]]:
    """A profile directory holding one real-looking trace, and a run that lists it beside
    files it must never serve."""
    prof = tmp_path / "profiles"
    sess = prof / "r" / "plugins" / "profile" / "s"
    sess.mkdir(parents=True)
    (sess / "host-0.trace.json.gz").write_bytes(b"\x1f\x8b trace bytes")
    secret = tmp_path / "home" / "secret.xplane.pb"
    secret.parent.mkdir()
    secret.write_bytes(b"not yours")
    (sess / "link.xplane.pb").symlink_to(secret)  # a link out of the profile directory
    big = sess / "huge.xplane.pb"
    with open(big, "wb") as f:  # 4 GB, sparse
        f.truncate(4 << 30)
    (sess / "notes.txt").write_text("inside, but not a trace")
    entries = [
        "host-0.trace.json.gz",  # 0: served
        "/etc/passwd",
        "../../../../../../../../etc/hostname",
        str(secret),
        "link.xplane.pb",
        "huge.xplane.pb",
        "notes.txt",
        f"../../../../../home/{secret.name}",
        "file:///etc/passwd",
        "memory://elsewhere/x.xplane.pb",
    ]
    _run_with_files(store, "r", str(sess), entries)
    return prof, entries


def test_only_files_under_the_profile_dirs_are_served(
    serve: Any, store: SQLiteStore, attack: tuple[Path, list[str]]
) -> None:
    prof, entries = attack
    srv = serve(store, profile_dirs=[str(prof)])
    status, body = _status(srv.url + "api/runs/r/profiles/0/0")
    assert status == 200 and body == b"\x1f\x8b trace bytes"
    for i in range(1, len(entries)):
        status, body = _status(srv.url + f"api/runs/r/profiles/0/{i}")
        assert status == 404, (entries[i], body[:200])
        assert b"not served" in body and b"root:" not in body and b"not yours" not in body
    # the run page's own list of a session's files is as the store says; a wrong index is a 404
    assert get(srv.url + "api/runs/r/profiles/0/99")[0] == 404
    assert get(srv.url + "api/runs/r/profiles/-1/0")[0] == 404


def test_with_no_profile_dirs_configured_nothing_is_served(
    serve: Any, store: SQLiteStore, attack: tuple[Path, list[str]]
) -> None:
    srv = serve(store, profile_dirs=[])
    assert _status(srv.url + "api/runs/r/profiles/0/0")[0] == 404


def test_a_large_trace_is_streamed_in_pieces(serve: Any, store: SQLiteStore, tmp_path: Path) -> None:
    sess = tmp_path / "p" / "big" / "plugins" / "profile" / "s"
    sess.mkdir(parents=True)
    blob = os.urandom(3 << 20) + b"end"
    (sess / "h.xplane.pb").write_bytes(blob)
    _run_with_files(store, "big", str(sess), ["h.xplane.pb"])
    srv = serve(store, profile_dirs=[str(tmp_path / "p")], max_profile_bytes=8 << 20)
    status, body = _status(srv.url + "api/runs/big/profiles/0/0")
    assert status == 200 and body == blob
    small = serve(store, profile_dirs=[str(tmp_path / "p")], max_profile_bytes=1 << 20)
    status, body = _status(small.url + "api/runs/big/profiles/0/0")
    assert status == 404 and b"over the 1,048,576 bytes served" in body


def test_a_real_xprof_session_downloads(serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("jax")
    import jax.numpy as jnp

    from mlgoodput.diagnostics import machinelearning_run, xprof

    db = tmp_path / "xprof.db"
    monkeypatch.setenv("MLGOODPUT_STORE", str(db))
    monkeypatch.setenv("MLGOODPUT_PROFILE_DIR", str(tmp_path / "profiles"))
    run = machinelearning_run(name="xp")
    with xprof(session_id="one"):
        float((jnp.arange(16.0) @ jnp.arange(16.0)).sum())
    run.end()
    st = SQLiteStore(db)
    try:
        prof = load_run(run.name, store=st).profiles[0]
        srv = serve(st)  # the default: the profile directory runs write to
        for i, name in enumerate(prof["files"]):
            status, body = _status(srv.url + f"api/runs/{run.name}/profiles/0/{i}")
            on_disk = Path(prof["path"]) / name
            assert status == 200 and body == on_disk.read_bytes() and len(body) > 0, name
    finally:
        st.close()


def test_a_remote_profile_dir_is_read_through_fsspec(serve: Any, store: SQLiteStore) -> None:
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/bucket/profiles/rr/plugins/profile/s/h-0.xplane.pb", b"remote trace")
    fs.pipe("/bucket/secret/x.xplane.pb", b"other")
    base = "memory://bucket/profiles/rr/plugins/profile/s"
    _run_with_files(
        store, "rr", base, [f"{base}/h-0.xplane.pb", "h-0.xplane.pb", "memory://bucket/profiles/../secret/x.xplane.pb"]
    )
    srv = serve(store, profile_dirs=["memory://bucket/profiles"])
    assert _status(srv.url + "api/runs/rr/profiles/0/0") == (200, b"remote trace")
    assert _status(srv.url + "api/runs/rr/profiles/0/1") == (200, b"remote trace")
    assert _status(srv.url + "api/runs/rr/profiles/0/2")[0] == 404
    none = serve(store, profile_dirs=["memory://bucket/other"])
    assert _status(none.url + "api/runs/rr/profiles/0/0")[0] == 404


def test_the_rule_itself() -> None:
    with pytest.raises(ValueError, match="max_profile_bytes"):
        ProfileFiles([], 0)
    with pytest.raises(ValueError, match="profile_dirs"):
        ProfileFiles(["gs://b/../x"])
    pf = ProfileFiles(["/srv/p"])
    assert pf.candidates({"path": "/srv/p/r/s", "local_paths": ["/tmp/l"]}, "a.xplane.pb") == [
        "/tmp/l/a.xplane.pb",
        "/srv/p/r/s/a.xplane.pb",
    ]
    assert pf.candidates({}, "x\0y") == [] and pf.candidates({}, 5) == []


def _rss_peak_kib(pid: int) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmHWM:\s+(\d+)", text).group(1))  # type: ignore[union-attr]


@pytest.mark.slow
def test_the_ui_process_stays_small_under_the_attack(
    tmp_path: Path, store: SQLiteStore, attack: tuple[Path, list[str]]
) -> None:
    """`mlgoodput ui` as a user runs it, asked for every listed file: none of the refused ones
    is read, and its memory stays under 100 MB."""
    prof, entries = attack
    store.close()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlgoodput",
            "ui",
            "--store",
            str(tmp_path / "ui.db"),
            "--port",
            "0",
            "--profile-dir",
            str(prof),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
    )
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        m = re.search(r"(http://\S+)", line)
        assert m, line
        url = m.group(1)
        for _ in range(3):
            for i in range(len(entries)):
                status, body = _status(url + f"api/runs/r/profiles/0/{i}")
                assert status == (200 if i == 0 else 404), (entries[i], body[:200])
        assert _rss_peak_kib(p.pid) < 100 * 1024
    finally:
        p.terminate()
        p.wait(30)


def test_idle_connections_never_starve_a_good_client(serve: Any, store: SQLiteStore) -> None:
    """1,000 connections that never send a request: a good client's pages are still served,
    and the server's threads stay bounded (idle connections cost no thread)."""
    import resource
    import threading

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2300:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    srv = serve(store)
    host, port = srv.server_address[:2]
    before = threading.active_count()
    idle = []
    try:
        for _ in range(1000):
            s = socket.create_connection((host, port))
            idle.append(s)
        wait_for(lambda: srv.limits.evicted + srv.limits.connections >= 1000, what="every idle connection accepted")
        for _ in range(5):
            assert get(srv.url + "api/health")[0] == 200
            assert get(srv.url)[0] == 200
        assert threading.active_count() - before < 50
        assert srv.limits.connections <= 256  # the rest were evicted, oldest first
    finally:
        for s in idle:
            s.close()


def test_a_nul_byte_or_a_bad_request_is_a_clean_answer(serve: Any, store: SQLiteStore) -> None:
    srv = serve(store)
    assert get(srv.url + "static/core.js%00.png")[0] == 404
    host, port = srv.server_address[:2]
    with socket.create_connection((host, port)) as s:
        s.sendall(b"NOT HTTP\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400")
    with socket.create_connection((host, port)) as s:
        s.sendall(b"POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 405")


def test_keep_alive_answers_several_requests_on_one_connection(serve: Any, store: SQLiteStore) -> None:
    import http.client

    srv = serve(store)
    host, port = srv.server_address[:2]
    c = http.client.HTTPConnection(host, port, timeout=30)
    try:
        for path in ("/api/health", "/api/jobs", "/", "/api/nothing"):
            c.request("GET", path)
            r = c.getresponse()
            r.read()
            assert r.status in (200, 404)
        wait_for(lambda: srv.limits.served >= 4, what="four answers on one connection")  # counted after the send
        c.request("HEAD", "/api/health")
        r = c.getresponse()
        assert r.status == 200 and r.read() == b"" and int(r.headers["Content-Length"]) > 0
    finally:
        c.close()
