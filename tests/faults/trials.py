"""Fault trials: an operator's bad day, run on 127.0.0.1, each counting what happened.

Every trial returns a `Trial`: events recorded, events stored (or, where the store is down on
purpose, kept in the journal for the next process), events reported lost, and how long the
step under test took. The tests in this folder assert on them; `bench/bench_faults.py`
prints them as a table.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import shutil
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mlgoodput._journal import Journal
from mlgoodput._recovery import journal_dirs, lost_in_process, recover_journals
from mlgoodput._segment import (
    HEADER_SIZE,
    SUFFIX,
    create_segment,
    decode_records,
    encode_extra,
    write_record,
)
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore, open_store

SRC = str(Path(__file__).resolve().parents[2] / "src")


@dataclass
class Trial:
    """One trial's counts: recorded = stored + lost must hold; lost is 0 unless bytes were damaged."""

    name: str
    recorded: int
    stored: int
    lost: int
    seconds: float
    damaged: int = 0  # records whose bytes the trial damaged (lost may be up to this)
    note: str = ""
    in_lost_stream: int | None = None  # what the store's lost stream says, where the trial reads it

    @property
    def balanced(self) -> bool:
        return self.recorded == self.stored + self.lost


def _steps(db: Path, ns: str = "ns", job: str = "job") -> set[int]:
    if not db.exists():
        return set()
    st = SQLiteStore(str(db))
    try:
        if not any(j.namespace == ns and j.job == job for j in st.jobs()):
            return set()
        return {int(s) for s in st.read(ns, job).columns.steps}
    finally:
        st.close()


def _losses(db: Path) -> int:
    from mlgoodput._cli.report import journal_losses

    st = open_store(str(db))
    try:
        return sum(journal_losses(st).values())
    finally:
        st.close()


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLGOODPUT_") or k == "MLGOODPUT_JOURNAL_DIR"}
    env["XDG_DATA_HOME"] = str(tmp / "xdg")
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    return env


_LOST = re.compile(r"(\d+) events of \S+ are lost")


def _reported_lost(stderr: str) -> int:
    return sum(int(m.group(1)) for m in _LOST.finditer(stderr))


# -- 1. the store deleted or replaced mid-run ------------------------------------------------
def store_swapped(tmp: Path, how: str, n: int = 20_000) -> Trial:
    """Delete (or replace with another store file) the SQLite store while a journal ships to it.
    Events stored before are counted from a flush that returned True (a deleted store takes
    them with it; a replaced one is kept readable through a hard link): every later event
    must reach the store now at the path."""
    db = tmp / "s.db"
    keep = tmp / "old.db"
    j = Journal(str(db), "ns", "job", 0, interval_s=0.005)
    t0 = time.monotonic()
    confirmed: set[int] = set()
    for i in range(n):
        j.append(Kind.STEP_START, float(i), i)
        if i == n // 2:
            confirmed = set(range(i + 1)) if j.flush(30) else set()  # stored in the file about to go
            os.link(db, keep)
            if how == "deleted":
                for suffix in ("", "-wal", "-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(str(db) + suffix)
            else:
                other = tmp / "other.db"
                s = SQLiteStore(str(other))
                s.append("other", "job", EventBatch(1, 0, [Event(Kind.JOB_START, 1.0, 0)]))
                s.close()
                os.replace(other, db)
    ok = j.flush(30)
    secs = time.monotonic() - t0
    changes, lost = j.store_changes, j.lost
    j.close()
    stored = (confirmed | _steps(keep) | _steps(db)) & set(range(n))
    after = _steps(db)  # the second half must be in the store now at the path
    return Trial(
        f"store {how} mid-run",
        n,
        len(stored),
        lost,
        secs,
        note=f"flush ok={ok}, replacement seen {changes}x, {len(after & set(range(n // 2 + 1, n)))}"
        f"/{n - n // 2 - 1} later events in the new store",
    )


# -- 2. bytes flipped ---------------------------------------------------------------------------
def _write_segment(directory: Path, url: str, n: int, sealed: bool = False) -> tuple[Path, list[Event]]:
    seg = create_segment(
        directory, HEADER_SIZE + 64 * n + 8192, 3, {"store": url, "namespace": "ns", "job": "job", "host": 3}
    )
    events = []
    off = seg.off
    for i in range(n):
        name = f"fn{i}" if i % 7 == 0 else None
        attrs = {"i": i} if i % 13 == 0 else None
        flags, extra, name_len = encode_extra(name, attrs) if (name or attrs) else (0, b"", 0)
        off += write_record(seg.buf, off, i, int(Kind.STEP_START), flags, name_len, float(i), i, 0.5 * i, extra)
        events.append(Event(Kind.STEP_START, float(i), 3, i, 0.5 * i, name, attrs))
    seg.count, seg.off = n, off
    if sealed:
        seg.seal()  # as a full segment is: its header then says exactly how many records it holds
    path = seg.path
    assert path is not None
    seg.release(delete=False)
    return path, events


def flipped_bytes(tmp: Path, offsets: list[int] | None = None, n: int = 400) -> list[Trial]:
    """For each offset: a dead journal segment with one byte flipped there, then recovery.
    Offsets cover both header copies, the watermark and the records (names, attrs, numbers);
    every other segment is sealed (a full one), the others were active when their writer died."""
    out = []
    for k, at in enumerate(offsets if offsets is not None else default_offsets(n)):
        db = tmp / f"t{k}" / "s.db"
        jdir = journal_dirs("sqlite://" + str(db))[0]
        jdir.mkdir(parents=True)
        path, events = _write_segment(jdir, "sqlite://" + str(db), n, sealed=k % 2 == 1)
        with open(path, "r+b") as f:
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0xFF]))
        before = lost_in_process()
        t0 = time.monotonic()
        recover_journals(str(db))
        secs = time.monotonic() - t0
        got = _stored_events(db)
        wrong = [e for e in got if e != events[e.step or 0]]
        if wrong:
            raise AssertionError(f"offset {at}: wrong values stored: {wrong[:3]}")
        lost = max(_losses(db), lost_in_process() - before)
        where = "header" if at < HEADER_SIZE else "records"
        out.append(
            Trial(f"byte flipped at {at} ({where})", n, len(got), lost, secs, damaged=0 if at < HEADER_SIZE else 1)
        )
    return out


def default_offsets(n: int = 400) -> list[int]:
    """Header fields of both copies, the watermark, and about 60 places spread over the records."""
    header = [0, 5, 9, 14, 20, 26, 30, 40, 90, 2048, 2053, 2060, 2080, 4056, 4058, 4061, 4064, 4070, 4076, 4088]
    rec_end = HEADER_SIZE + 52 * n  # about where the records end
    step = max(1, (rec_end - HEADER_SIZE) // 60)
    return header + list(range(HEADER_SIZE + 3, rec_end, step))


def _stored_events(db: Path) -> list[Event]:
    st = SQLiteStore(str(db))
    try:
        if not any(j.namespace == "ns" for j in st.jobs()):
            return []
        return list(st.read("ns", "job").columns.events())
    finally:
        st.close()


def both_headers_damaged(tmp: Path, n: int = 300) -> Trial:
    """Both header copies damaged: the stream is unknown, so the file is set aside and its
    records reported lost (never skipped in silence)."""
    db = tmp / "s.db"
    url = "sqlite://" + str(db)
    jdir = journal_dirs(url)[0]
    jdir.mkdir(parents=True)
    path, _ = _write_segment(jdir, url, n)
    with open(path, "r+b") as f:
        for at in (4, 2052):
            f.seek(at)
            f.write(b"\xff")
    before = lost_in_process()
    t0 = time.monotonic()
    recover_journals(str(db))
    secs = time.monotonic() - t0
    set_aside = path.with_suffix(".damaged").exists()
    from mlgoodput._cli.report import journal_losses

    st = open_store(str(db))
    try:
        in_store = journal_losses(st)
    finally:
        st.close()
    return Trial(
        "both header copies damaged",
        n,
        len(_steps(db)),
        lost_in_process() - before,
        secs,
        damaged=n,
        note=f"set aside as .damaged: {set_aside}; in the store's lost stream: {in_store}",
        in_lost_stream=sum(in_store.values()),
    )


# -- 3. a file-size limit (ulimit -f) -------------------------------------------------------
_CHILD = """
import resource, sys, time
if {fsize} > 0:
    resource.setrlimit(resource.RLIMIT_FSIZE, ({fsize}, {fsize}))
from mlgoodput._journal import Journal
from mlgoodput.events import Kind
Journal.deadline_s = {deadline}
j = Journal.for_stream({store!r}, "ns", "job", 0)
for i in range({n}):
    j.append(Kind.STEP_START, float(i), i)
t0 = time.monotonic()
ok = j.close()
print("close", ok, time.monotonic() - t0, flush=True)
"""


def _run_child(tmp: Path, store: str, n: int, deadline: float = 3.0, fsize: int | None = None) -> tuple[float, str]:
    # the child sets its own limit: no preexec_fn, so no fork of this (maybe multithreaded) process
    code = _CHILD.format(store=store, n=n, deadline=deadline, fsize=fsize or 0)
    r = subprocess.run([sys.executable, "-c", code], env=_env(tmp), capture_output=True, text=True, timeout=120)
    m = re.search(r"close (\w+) ([\d.]+)", r.stdout)
    if r.returncode != 0 or m is None:
        raise AssertionError(f"child failed ({r.returncode}): {r.stdout}\n{r.stderr}")
    return float(m.group(2)), r.stderr


def file_size_limit(tmp: Path, n: int = 100_000, fsize: int = 1 << 20) -> Trial:
    db = tmp / "s.db"
    secs, err = _run_child(tmp, str(db), n, fsize=fsize)
    lost = _reported_lost(err)
    os.environ["XDG_DATA_HOME"] = str(tmp / "xdg")  # recover where the child journaled
    recover_journals(str(db))
    return Trial(
        f"file-size limit {fsize >> 10} KiB (ulimit -f)",
        n,
        len(_steps(db)),
        lost,
        secs,
        note="close() time in the child; the rest recovered by the next process",
    )


# -- 4. a small filesystem ----------------------------------------------------------------------
@contextlib.contextmanager
def small_fs(tmp: Path, size: str = "6m") -> Iterator[Path | None]:
    """A tmpfs of a few MB, or None (with the reason in `small_fs.why`) where mounting is not allowed."""
    mnt = tmp / "small"
    mnt.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if r.returncode != 0:
        small_fs.why = r.stderr.strip() or "mount failed"  # type: ignore[attr-defined]
        yield None
        return
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def small_filesystem(mnt: Path, tmp: Path, n: int = 60_000) -> Trial:
    db = mnt / "s.db"
    j = Journal(str(db), "ns", "job", 0)
    t0 = time.monotonic()
    for i in range(n):
        j.append(Kind.STEP_START, float(i), i)
    ok = j.flush(30)
    sizes = [p.stat().st_size for p in mnt.rglob(f"*{SUFFIX}")]
    j.close(5)
    secs = time.monotonic() - t0
    recover_journals(str(db))
    return Trial(
        "6 MB filesystem",
        n,
        len(_steps(db)),
        j.lost,
        secs,
        note=f"flush ok={ok}; segments on it: {len(sizes)} of at most {max(sizes, default=0) >> 10} KiB",
    )


# -- 5. backends down and hanging -------------------------------------------------------------
def sqlite_locked(tmp: Path, n: int = 20_000, deadline: float = 1.5) -> Trial:
    """Another process holds the SQLite store locked; the recorder's close() must return by its
    deadline and leave the events for the next process."""
    db = tmp / "s.db"
    SQLiteStore(str(db)).jobs()  # create it
    holder = sqlite3.connect(str(db), isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        secs, err = _run_child(tmp, str(db), n, deadline=deadline)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    os.environ["XDG_DATA_HOME"] = str(tmp / "xdg")
    recover_journals(str(db))
    return Trial(
        f"SQLite locked (close deadline {deadline:g} s)",
        n,
        len(_steps(db)),
        _reported_lost(err),
        secs,
        note="seconds: close() in the child",
    )


def memory_fallback(tmp: Path, n: int = 5_000) -> Trial:
    """No journal file can be made (the journal directory sits under a regular file) and the
    store is unreachable: the events held in memory are lost at exit, and a warning says how
    many and where they could not go."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    blocker = tmp / "not-a-dir"
    blocker.write_text("x")
    env_dir = str(blocker / "journals")
    os.environ["MLGOODPUT_JOURNAL_DIR"] = env_dir
    try:
        secs, err = _run_child(tmp, f"postgresql://nobody@127.0.0.1:{port}/none", n, deadline=1.0)
    finally:
        del os.environ["MLGOODPUT_JOURNAL_DIR"]
    lost = _reported_lost(err)
    said_where = "held in memory because no journal file could be made in" in err
    return Trial(
        "no journal file possible, store down",
        n,
        0,
        lost,
        secs,
        damaged=n,
        note=f"nothing could hold them (counted as damaged); warning names the directory:"
        f" {said_where and env_dir in err}",
    )


def postgres_down(tmp: Path, n: int = 20_000, deadline: float = 1.5, hanging: bool = False) -> Trial:
    """PostgreSQL unreachable (refused, or `hanging`: accepting and never answering): close()
    returns by its deadline; every event stays journaled for the next process."""
    with contextlib.ExitStack() as stack:
        if hanging:
            port = stack.enter_context(hanging_server())
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        url = f"postgresql://nobody@127.0.0.1:{port}/none"
        secs, err = _run_child(tmp, url, n, deadline=deadline)
    os.environ["XDG_DATA_HOME"] = str(tmp / "xdg")
    kept = _kept_in_journals(url)
    return Trial(
        f"PostgreSQL {'hanging' if hanging else 'down'} (close deadline {deadline:g} s)",
        n,
        kept,
        _reported_lost(err),
        secs,
        note="stored = kept in the journal for the next process",
    )


def _kept_in_journals(url: str, keep: Any = None) -> int:
    """Events (those `keep` accepts) waiting in the journal files of the store at `url`."""
    kept = 0
    for d in journal_dirs(url):
        for p in d.glob(f"*{SUFFIX}"):
            data = p.read_bytes()
            off, nxt = HEADER_SIZE, 0
            while True:
                r = decode_records(data, off, len(data), 0, 1 << 20, nxt)
                kept += len(r.events) if keep is None else sum(1 for e in r.events if keep(e))
                off, nxt = r.end, r.next_index
                if r.at_end:
                    break
    return kept


@contextlib.contextmanager
def hanging_server() -> Iterator[int]:
    """A TCP server that accepts connections and never answers."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def run() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                held.append(srv.accept()[0])

    t = threading.Thread(target=run, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join(2)
        for c in held:
            c.close()
        srv.close()


def exporter_stop(kind: str, timeout_s: float = 4.0) -> Trial:
    """An OTLP backend down (refused) or hanging (accepts, never answers): stop() returns by its
    deadline; a refused backend gets one final try, not retries until the deadline."""
    from mlgoodput.export import ExporterProcess, OTLPExporter, Sample

    with contextlib.ExitStack() as stack:
        if kind == "hanging":
            port = stack.enter_context(hanging_server())
        else:
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
        proc = ExporterProcess(
            [OTLPExporter(f"http://127.0.0.1:{port}/v1/metrics", protocol="http", timeout_s=2.0)], interval_s=60
        )
        proc.start()
        proc.submit([Sample("goodput/goodput_pct", 50.0, {"job_name": "j"})])
        t0 = time.monotonic()
        ok = proc.stop(timeout_s)
        secs = time.monotonic() - t0
    return Trial(f"OTLP backend {kind}: stop({timeout_s:g})", 0, 0, 0, secs, note=f"stop returned {ok}")


def monitor_stop_with_failing_exporter(tmp: Path, timeout_s: float | None = 1.0) -> Trial:
    """GoodputMonitor.stop_goodput_uploader() with a backend that refuses connections: its
    final upload (in the background) ends after one last try, long before its 10 s default
    deadline (`timeout_s`: the OTLP exporter's own timeout; None leaves its default, 10 s, as
    users do)."""
    from mlgoodput import monitoring
    from mlgoodput.export import OTLPExporter

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    m = monitoring.GoodputMonitor(
        "job",
        "ns",
        None,
        upload_interval=60,
        monitoring_enabled=True,
        store=str(tmp / "s.db"),
        exporters=[
            OTLPExporter(f"http://127.0.0.1:{port}/v1/metrics", protocol="http")
            if timeout_s is None
            else OTLPExporter(f"http://127.0.0.1:{port}/v1/metrics", protocol="http", timeout_s=timeout_s)
        ],
    )
    m.start_goodput_uploader()
    t0 = time.monotonic()
    handed = m.stop_goodput_uploader()  # returns at once: the final upload goes on in the background
    ok = m.wait_for_final_uploads()  # the stop's final try, timed to its end
    secs = time.monotonic() - t0
    return Trial(
        "monitor stop + final upload, backend refusing" + (" (OTLP timeout default)" if timeout_s is None else ""),
        0,
        0,
        0,
        secs,
        note=f"stop returned {handed}, final upload {ok}; default deadline {m.stop_timeout_s:g} s",
    )


# -- 6. a port in TIME_WAIT ---------------------------------------------------------------------
def time_wait_port() -> Trial:
    """A trainer restarted on its Prometheus port: the previous exporter was scraped (its side of
    the connection now lingers in TIME_WAIT) and stopped; the new one binds the port at once."""
    from mlgoodput.export import PrometheusExporter, Sample

    old = PrometheusExporter(port=0, first_scrape_wait_s=0)  # its scrape is answered at once (its 5 s
    old.start()  # first-scrape wait raced the client's 5 s timeout below)
    port = old.port
    with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
        c.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        while c.recv(65536):  # read to the server's close: its side of the connection is the one in TIME_WAIT
            pass
    old.shutdown()
    plain = socket.socket()  # how the old check looked: a bind without SO_REUSEADDR
    try:
        plain.bind(("127.0.0.1", port))
        in_time_wait = False
    except OSError:
        in_time_wait = True
    finally:
        plain.close()
    t0 = time.monotonic()
    exp = PrometheusExporter(port=port)
    exp.start()
    try:
        exp.export([Sample("goodput/goodput_pct", 42.0, {"job_name": "j"})])
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        secs = time.monotonic() - t0
        served = "mlgoodput_goodput_ratio" in body
        status = exp.status
    finally:
        exp.shutdown()
    return Trial(
        "Prometheus port in TIME_WAIT", 1, int(served), 0, secs, note=f"port in TIME_WAIT: {in_time_wait}; {status}"
    )


def busy_port_retried(hold_s: float = 1.5) -> Trial:
    """Another process still listens on the port: the exporter keeps training going, retries,
    and serves once the port is free."""
    from mlgoodput.export import PrometheusExporter, Sample

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    t0 = time.monotonic()
    exp = PrometheusExporter(port=port)
    exp.start()
    try:
        exp.export([Sample("goodput/goodput_pct", 42.0, {"job_name": "j"})])
        waiting = exp.status
        time.sleep(hold_s)
        holder.close()
        deadline = time.monotonic() + 20
        while not exp.serving and time.monotonic() < deadline:
            time.sleep(0.05)
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        secs = time.monotonic() - t0
    finally:
        holder.close()
        exp.shutdown()
    return Trial(
        "Prometheus port held by another process",
        1,
        int("mlgoodput_goodput_ratio" in body),
        0,
        secs,
        note=f"status while held: {waiting[:60]}",
    )


def monitor_cli_busy_port(tmp: Path) -> Trial:
    """`mlgoodput monitor --prometheus-port P` while another process holds P: it keeps running,
    retries, serves once the port is free, and exits cleanly."""
    import signal

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    t0 = time.monotonic()
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlgoodput",
            "monitor",
            "--job",
            "j",
            "--store",
            str(tmp / "s.db"),
            "--prometheus-port",
            str(port),
            "--interval",
            "0.5",
            "--quiet",
        ],
        env=_env(tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    served = False
    try:
        time.sleep(2.0)
        alive_while_busy = p.poll() is None
        holder.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and p.poll() is None:
            try:
                body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
                served = "mlgoodput_" in body
                if served:
                    break
            except OSError:
                time.sleep(0.2)
        secs = time.monotonic() - t0
    finally:
        holder.close()
        if p.poll() is None:
            p.send_signal(signal.SIGINT)
        try:
            _, err = p.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
    return Trial(
        "mlgoodput monitor, port held at start",
        1,
        int(served),
        0,
        secs,
        note=f"alive while held: {alive_while_busy}; exit {p.returncode}; retried: {'retrying' in err}",
    )


# -- 7. servers under idle, slow and oversized strangers --------------------------------------
def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _open_idle(port: int, n: int, *, send: bytes = b"") -> list[socket.socket]:
    socks = []
    for _ in range(n):
        s = socket.socket()
        s.setblocking(True)
        try:
            s.connect(("127.0.0.1", port))
            if send:
                with contextlib.suppress(OSError):
                    s.setblocking(False)
                    s.send(send)
        except OSError:
            s.close()
            continue
        socks.append(s)
    return socks


def _raise_fd_limit(n: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, n)) if hard != resource.RLIM_INFINITY else max(soft, n)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def console_under_strangers(idle: int = 1000, oversized: int = 200) -> Trial:
    from mlgoodput.console import ConsoleClient, ConsoleServer
    from mlgoodput.console import _protocol as P

    _raise_fd_limit(4 * idle + 256)
    srv = ConsoleServer("127.0.0.1:0", store="memory://faults-console", display=False, job="faults")
    addr = srv.start()
    port = int(addr.rsplit(":", 1)[1])
    rss0 = _rss_mb()
    socks: list[socket.socket] = []
    client = None
    try:
        socks += _open_idle(port, idle)
        socks += _open_idle(port, oversized, send=P.HEADER.pack(P.MAX_FRAME_BYTES) + b"x" * 60000)
        t0 = time.monotonic()
        client = ConsoleClient(addr, token=srv.token)
        client.start()
        n = 100
        for i in range(n):
            client.put(P.LogRec(time.time(), 20, "faults", f"line {i}", "x.py", i))
        deadline = time.monotonic() + 30
        while (client.pending or client.process is None) and time.monotonic() < deadline:
            time.sleep(0.02)
        secs = time.monotonic() - t0
        grew = _rss_mb() - rss0
        stored = n - client.pending
    finally:
        if client is not None:
            client.close(5)
        t1 = time.monotonic()
        srv.stop(5)  # while the strangers still hold their connections
        stop_s = time.monotonic() - t1
        for s in socks:
            s.close()
    return Trial(
        f"console: {idle} idle + {oversized} oversized strangers",
        n,
        stored,
        0,
        secs,
        note=f"good client served in {secs:.2f} s; {srv.evicted} evicted; stop {stop_s:.2f} s; memory +{grew:.0f} MB",
    )


def ondemand_under_strangers(tmp: Path, idle: int = 1000, slow: int = 20) -> Trial:
    from types import SimpleNamespace

    from mlgoodput.diagnostics._ondemand import OnDemandServer, request

    _raise_fd_limit(4 * idle + 256)
    os.environ["MLGOODPUT_RUNTIME_DIR"] = str(tmp / "rt")
    run: Any = SimpleNamespace(name="faults-run", process_index=0, hostname="h")
    srv = OnDemandServer(run)
    srv.start()
    port = int(srv.address.rsplit(":", 1)[1])
    rss0 = _rss_mb()
    socks: list[socket.socket] = []
    try:
        socks += _open_idle(port, idle)
        socks += _open_idle(port, slow, send=b'{"v": 1, "tok')  # never finished
        socks += _open_idle(port, 50, send=b"x" * 100_000)  # over the request limit
        t0 = time.monotonic()
        n = 20
        ok = sum(1 for _ in range(n) if request(srv.address, srv.token, {"op": "ping"}, timeout_s=10).get("ok"))
        secs = time.monotonic() - t0
        grew = _rss_mb() - rss0
    finally:
        t1 = time.monotonic()
        srv.close(5)  # while the strangers still hold their connections
        close_s = time.monotonic() - t1
        for s in socks:
            s.close()
    return Trial(
        f"on-demand: {idle} idle + {slow} slow + 50 oversized",
        n,
        ok,
        0,
        secs,
        note=f"{n} pings in {secs:.2f} s; {srv.limits.evicted} evicted; close {close_s:.2f} s; memory +{grew:.0f} MB",
    )


def prometheus_under_strangers(idle: int = 1000) -> Trial:
    from mlgoodput.export import PrometheusExporter, Sample

    _raise_fd_limit(4 * idle + 256)
    exp = PrometheusExporter(port=0)
    exp.start()
    exp.export([Sample("goodput/goodput_pct", 42.0, {"job_name": "j"})])
    rss0 = _rss_mb()
    socks: list[socket.socket] = []
    try:
        socks += _open_idle(exp.port, idle)
        socks += _open_idle(exp.port, 20, send=b"GET /metrics HTTP/1.1\r\n")  # slow: never finished
        t0 = time.monotonic()
        n = 20
        ok = 0
        for _ in range(n):
            body = urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics", timeout=10).read().decode()
            ok += "mlgoodput_goodput_ratio" in body
        secs = time.monotonic() - t0
        grew = _rss_mb() - rss0
    finally:
        t1 = time.monotonic()
        exp.shutdown()  # while the strangers still hold their connections
        close_s = time.monotonic() - t1
        for s in socks:
            s.close()
    return Trial(
        f"Prometheus: {idle} idle + 20 slow",
        n,
        ok,
        0,
        secs,
        note=f"{n} scrapes in {secs:.2f} s; shutdown {close_s:.2f} s; memory +{grew:.0f} MB",
    )


def unix_paths_are_not_ours(tmp: Path) -> Trial:
    """A regular file at the socket path of the console or on-demand server is never deleted."""
    from types import SimpleNamespace

    from mlgoodput.console import ConsoleServer
    from mlgoodput.diagnostics._ondemand import OnDemandServer

    victim = tmp / "precious.txt"
    victim.write_text("keep me")
    refused = 0
    t0 = time.monotonic()
    try:
        ConsoleServer(f"unix:{victim}", store="memory://faults-unix", display=False).start()
    except OSError:
        refused += 1
    os.environ["MLGOODPUT_RUNTIME_DIR"] = str(tmp / "rt")
    try:
        OnDemandServer(SimpleNamespace(name="r", process_index=0, hostname="h"), address=f"unix:{victim}")  # type: ignore[arg-type]
    except ValueError:
        refused += 1
    kept = victim.read_text() == "keep me"
    return Trial("unix: path is a regular file", 2, refused, 0, time.monotonic() - t0, note=f"file kept: {kept}")


def cleanup(tmp: Path) -> None:
    shutil.rmtree(tmp, ignore_errors=True)


# -- 8. the console and the web UI keep the recorder's promises (issue 28) -----------------------
def ui_under_strangers(idle: int = 1000) -> Trial:
    """1,000 connections that never send a request to `mlgoodput ui`'s server: a good client's
    page, and the server's threads (one per connection was the old pattern)."""
    from mlgoodput.ui import UIServer

    _raise_fd_limit(2 * idle + 256)
    st = open_store("memory://faults-ui")
    srv = UIServer(st, "127.0.0.1", 0)
    srv.start()
    port = int(srv.server_address[1])
    threads0 = threading.active_count()
    socks: list[socket.socket] = []
    try:
        socks += _open_idle(port, idle)
        limits = getattr(srv, "limits", None)  # (older servers had no counters: a moment instead)
        deadline = time.monotonic() + 60
        while limits is not None and limits.evicted + limits.connections < len(socks):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        if limits is None:
            time.sleep(0.5)
        threads = threading.active_count() - threads0  # every stranger taken: a thread each, or none
        t0 = time.monotonic()
        served = 0
        for _ in range(20):
            with urllib.request.urlopen(srv.url + "api/health", timeout=60) as r:
                served += r.status == 200
        secs = (time.monotonic() - t0) / 20
    finally:
        for s in socks:
            s.close()
        srv.stop()
    return Trial(
        f"UI: {idle} idle strangers",
        20,
        served,
        0,
        secs,
        note=f"a good page in {1000 * secs:.0f} ms (mean of 20); threads added by the strangers: {threads}",
    )


def ui_profile_paths(tmp: Path) -> Trial:
    """A run in the store lists /etc/passwd, `..` paths, a symbolic link out of the profile
    directory and a 4 GB sparse file as profile files: how many the UI serves."""
    from mlgoodput.ui import UIServer

    prof = tmp / "profiles"
    sess = prof / "r" / "plugins" / "profile" / "s"
    sess.mkdir(parents=True)
    (sess / "h.trace.json.gz").write_bytes(b"trace")
    (tmp / "secret.xplane.pb").write_bytes(b"secret")
    (sess / "link.xplane.pb").symlink_to(tmp / "secret.xplane.pb")
    with open(sess / "huge.xplane.pb", "wb") as f:
        f.truncate(4 << 30)
    bad = [
        "/etc/passwd",
        "../../../../../../etc/hostname",
        "link.xplane.pb",
        "huge.xplane.pb",
        str(tmp / "secret.xplane.pb"),
    ]
    st = open_store(str(tmp / "ui.db"))
    t = time.time()
    st.append(
        "mlgoodput.run",
        "r",
        EventBatch(
            1,
            0,
            [
                Event(Kind.RUN_START, t, 0, attrs={"profile_dir": str(prof)}),
                Event(Kind.PROFILE_START, t, 0, name="s", attrs={"session": "s", "path": str(sess)}),
                Event(
                    Kind.PROFILE_STOP,
                    t + 1,
                    0,
                    value=1.0,
                    name="s",
                    attrs={"session": "s", "path": str(sess), "files": ["h.trace.json.gz", *bad]},
                ),
            ],
        ),
    )
    try:  # the configured profile directory, where the server takes one (older ones did not)
        srv = UIServer(st, "127.0.0.1", 0, profile_dirs=[str(prof)])  # type: ignore[call-arg]
    except TypeError:
        srv = UIServer(st, "127.0.0.1", 0)
    srv.start()
    rss0 = _rss_mb()
    served_bad = 0
    good = False
    t0 = time.monotonic()
    try:
        for i in range(len(bad) + 1):
            try:
                with urllib.request.urlopen(srv.url + f"api/runs/r/profiles/0/{i}", timeout=120) as r:
                    body = r.read()
                    if i == 0:
                        good = body == b"trace"
                    else:
                        served_bad += 1
            except urllib.error.HTTPError:
                pass
    finally:
        secs = time.monotonic() - t0
        grew = _rss_mb() - rss0
        srv.stop()
        st.close()
    return Trial(
        "UI: profile paths from the store",
        len(bad),
        len(bad) - served_bad,
        0,
        secs,
        note=f"refused {len(bad) - served_bad} of {len(bad)} (stored = refused); the run's own trace served: {good}; memory +{grew:.0f} MB",
    )


_SESSION_CHILD = """
import json, logging, sys, time
import mlgoodput.console as C
store, n = sys.argv[1], int(sys.argv[2])
log = logging.getLogger("train")
t0 = time.monotonic()
cm = C.session(job="faults", store=store, display=False)
cm.__enter__()
entry = time.monotonic() - t0
for i in range(n):
    log.info("line %d", i)
t1 = time.monotonic()
cm.__exit__(None, None, None)
print(json.dumps({"entry": entry, "exit": time.monotonic() - t1}), flush=True)
"""


def console_store_down(tmp: Path, how: str, n: int = 1000) -> Trial:
    """`console.session()` while its store cannot take records (`locked`: SQLite held by
    another process; `down`: PostgreSQL refusing): the time to enter and to leave, and the
    lines stored once the store is back (SQLite) or kept for it (PostgreSQL)."""
    import json

    blocker = None
    if how == "locked":
        url = str(tmp / "c.db")
        open_store(url).close()
        st = open_store(url)
        st.jobs()
        st.close()
        blocker = sqlite3.connect(url, isolation_level=None)
        blocker.execute("BEGIN EXCLUSIVE")
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            url = f"postgresql://nobody@127.0.0.1:{s.getsockname()[1]}/none"
    try:
        r = subprocess.run(
            [sys.executable, "-c", _SESSION_CHILD, url, str(n)],
            env=_env(tmp),
            capture_output=True,
            text=True,
            timeout=300,
        )
        lines = r.stdout.strip().splitlines()
        got = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None
        failed = "" if got is not None else (r.stderr.strip().splitlines() or ["?"])[-1][:100]
    finally:
        if blocker is not None:
            blocker.execute("ROLLBACK")
            blocker.close()
    os.environ["XDG_DATA_HOME"] = str(tmp / "xdg")
    if how == "locked":
        recover_journals(url)
        stored = sum(1 for r in _console_lines(url) if r.startswith("line "))
        note = "stored once the lock is let go"
    else:
        stored = _kept_in_journals(url, lambda e: e.kind == Kind.LOG and e.name == "train")
        note = "stored = kept in the console's journal for the store"
    name = f"console session, {'SQLite locked' if how == 'locked' else 'PostgreSQL down'}"
    if got is None:
        return Trial(name, n, stored, 0, 0.0, note=f"session() raised: {failed}")
    return Trial(
        name,
        n,
        stored,
        0,
        float(got["exit"]),
        note=f"entry {1000 * float(got['entry']):.0f} ms, exit {float(got['exit']):.1f} s (seconds = exit); {note}",
    )


def _console_lines(url: str) -> list[str]:
    st = open_store(url)
    try:
        if not any(j.namespace == "mlgoodput.console" for j in st.jobs()):
            return []
        cols = st.read("mlgoodput.console", "faults").columns
        return [str((cols.attr(i) or {}).get("msg", "")) for i in range(len(cols)) if cols.name(i) == "train"]
    finally:
        st.close()


def tensorboard_unwritable(tmp: Path) -> Trial:
    """A TensorBoard folder that cannot be made when the uploader starts (a file is in its way):
    does `start_goodput_uploader()` return, and do uploads resume once it can be made?"""
    from mlgoodput import monitoring

    db = tmp / "s.db"
    t0 = time.time() - 100
    st = open_store(str(db))
    st.append(
        "goodput_j",
        "j",
        EventBatch(1, 0, [Event(Kind.JOB_START, t0), *[Event(Kind.STEP_START, t0 + 1 + i, 0, i) for i in range(50)]]),
    )
    st.close()
    tb = tmp / "tb"
    tb.write_text("in the way")
    m = monitoring.GoodputMonitor(
        job_name="j",
        logger_name="goodput_j",
        tensorboard_dir=str(tb),
        upload_interval=1,
        monitoring_enabled=True,
        store=str(db),
    )
    s0 = time.monotonic()
    try:
        m.start_goodput_uploader()
        raised = ""
    except Exception as e:
        raised = f"{type(e).__name__}"
    secs = time.monotonic() - s0
    resumed = False
    if not raised:
        tb.unlink()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not resumed:
            resumed = any((tb / "goodput").glob("events.out.tfevents.*")) if tb.is_dir() else False
            time.sleep(0.2)
        m.stop_goodput_uploader()
    return Trial(
        "TensorBoard folder unwritable at start",
        1,
        int(resumed),
        0,
        secs,
        note=("raised " + raised) if raised else f"start returned; uploads resumed once writable: {resumed}",
    )


def zero_length_last_record(tmp: Path, n: int = 100) -> Trial:
    """A dead segment whose last committed record's length reads zero, and no committed count
    in its header (the shipper never ran): kept, counted, or lost in silence?"""
    db = tmp / "s.db"
    url = "sqlite://" + str(db)
    jdir = journal_dirs(url)[0]
    jdir.mkdir(parents=True)
    path, _ = _write_segment(jdir, url, n)
    data = bytearray(path.read_bytes())
    off = HEADER_SIZE
    for _ in range(n - 1):
        ln = int.from_bytes(data[off : off + 4], "little")
        off += (ln + 7) & ~7
    with open(path, "r+b") as f:
        f.seek(off)
        f.write(bytes(4))  # the last record's length
    before = lost_in_process()
    t0 = time.monotonic()
    recover_journals(str(db))
    secs = time.monotonic() - t0
    stored = len(_steps(db))
    return Trial(
        "last record's length reads zero",
        n,
        stored,
        lost_in_process() - before,
        secs,
        damaged=1,
        note=f"{stored} of {n} stored, {lost_in_process() - before} reported lost",
    )


def first_report_after_crash(tmp: Path, steps: int = 300_000) -> Trial:
    """A process killed with its journal in several segments, never shipped: the time of the
    first report (which recovers the journal, in whatever order, then reads the job)."""
    db = tmp / "crash.db"
    st = open_store(str(db))
    st.jobs()
    st.close()
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    code = (
        "import sys, time\nfrom mlgoodput import goodput\n"
        "rec = goodput.GoodputRecorder('job', 'goodput', True, store=sys.argv[1])\n"
        "rec.record_job_start_time()\n"
        "for i in range(int(sys.argv[2])):\n    rec.record_step_start_time(i)\n"
        "print('ready', flush=True)\ntime.sleep(600)\n"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code, str(db), str(steps)], stdout=subprocess.PIPE, env=_env(tmp), text=True
    )
    try:
        assert p.stdout is not None
        p.stdout.readline()
        p.kill()
        p.wait(30)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    os.environ["XDG_DATA_HOME"] = str(tmp / "xdg")
    segs = sum(1 for d in journal_dirs("sqlite://" + str(db)) for _ in d.glob(f"*{SUFFIX}"))
    from mlgoodput import goodput

    t0 = time.monotonic()
    _, _, last = goodput.GoodputCalculator("job", "goodput", store=str(db)).get_job_goodput()
    secs = time.monotonic() - t0
    return Trial(
        f"first report after a crash, {steps:,} steps",
        steps,
        last + 1,
        0,
        secs,
        note=f"{segs} segments recovered in any order; seconds = the first report",
    )


def silent_profile_endpoint() -> Trial:
    """`mlgoodput profile --duration 1s` against a process that accepts and never answers."""
    from mlgoodput.diagnostics import capture

    with hanging_server() as port:
        t0 = time.monotonic()
        (r,) = capture(None, 1.0, address=f"127.0.0.1:{port}", token="t")
        secs = time.monotonic() - t0
    return Trial("profile capture, silent endpoint", 0, 0, 0, secs, note=str(r.get("error", ""))[:80])
