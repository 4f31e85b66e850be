"""Console throughput and client cost, beside the stdlib SocketHandler with a pickle receiver.

Four client processes log as fast as they can for a few seconds into one server; the
table shows records received per second in steady state (counted at the server, every
record stored and none lost for mlgoodput) and the median cost of one `logging.info` call.

    PYTHONPATH=src python bench/bench_console.py [--seconds 4] [--clients 4] [--pin]
"""

from __future__ import annotations

import argparse
import logging
import logging.handlers
import multiprocessing as mp
import os
import pickle
import shutil
import socketserver
import statistics
import struct
import sys
import tempfile
import threading
import time
from typing import Any

N_PER_ROUND = 2000
STORE_PROCESS = True  # as `mlgoodput console serve` runs: the store written from a child process
PIN = False  # --pin: the receiving side on CPU 0, the clients on the others


def _log_loop(seconds: float, rate: float, start_evt: mp.synchronize.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    """Log for `seconds`, at `rate` records/s (0: as fast as possible), timing one call in 64."""
    log = logging.getLogger("bench")
    start_evt.wait()
    pc = time.perf_counter
    t_start = pc()
    t_end = t_start + seconds
    costs: list[float] = []
    n = 0
    while pc() < t_end:
        if rate:
            due = t_start + n / rate
            if due > pc():
                time.sleep(due - pc())
        for i in range(N_PER_ROUND):
            if i % 64 == 0:
                t0 = pc()
                log.info("step %d loss %.3f", n, 0.5)
                costs.append(pc() - t0)
            else:
                log.info("step %d loss %.3f", n, 0.5)
            n += 1
    out.put((n, costs))


def _mlg_client(address: str, seconds: float, rate: float, start_evt: mp.synchronize.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    import mlgoodput.console as C

    C.connect(address)
    _log_loop(seconds, rate, start_evt, out)
    ok = C.disconnect(timeout_s=120)
    out.put(("ok", ok))


def _stdlib_client(port: int, seconds: float, rate: float, start_evt: mp.synchronize.Event, out: mp.Queue) -> None:  # type: ignore[type-arg]
    root = logging.getLogger()
    root.setLevel(logging.INFO)
    h = logging.handlers.SocketHandler("127.0.0.1", port)
    root.addHandler(h)
    _log_loop(seconds, rate, start_evt, out)
    h.close()
    out.put(("ok", True))


# -- the logging cookbook's receiver: unpickle each record and handle it -------------------
class _RecordHandler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        while True:
            chunk = self.connection.recv(4)
            if len(chunk) < 4:
                break
            slen = struct.unpack(">L", chunk)[0]
            chunk = self.connection.recv(slen)
            while len(chunk) < slen:
                chunk = chunk + self.connection.recv(slen - len(chunk))
            obj = pickle.loads(chunk)  # what the seed's design does: runs code from the socket
            record = logging.makeLogRecord(obj)
            self.server.count += 1  # type: ignore[attr-defined]
            self.server.records.append(record.getMessage()) if len(self.server.records) < 1 else None  # type: ignore[attr-defined]


class _Receiver(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _RecordHandler)
        self.count = 0
        self.records: list[str] = []


def _run(kind: str, clients: int, seconds: float, rate: float) -> dict[str, float]:
    ctx = mp.get_context("spawn")
    start_evt = ctx.Event()
    out: mp.Queue = ctx.Queue()  # type: ignore[type-arg]
    tmp = tempfile.mkdtemp()
    cpus = sorted(os.sched_getaffinity(0))
    if PIN:  # the server's threads and its store helper (started below) keep to the first CPU
        os.sched_setaffinity(0, cpus[:1])
    if kind == "mlgoodput":
        from mlgoodput.console import ConsoleServer

        srv = ConsoleServer(
            f"unix:{tmp}/bench.sock", job="bench", store=f"{tmp}/bench.db", display=False, store_process=STORE_PROCESS
        )
        address = srv.start()
        count = lambda: srv.received  # noqa: E731
        # the steady rate is of records stored (received ones may only be waiting in memory)
        steady_count = lambda: srv.sink.stored_events  # noqa: E731
        procs = [
            ctx.Process(target=_mlg_client, args=(address, seconds, rate / clients, start_evt, out))
            for _ in range(clients)
        ]
    else:
        rsrv = _Receiver()
        port = rsrv.server_address[1]
        threading.Thread(target=rsrv.serve_forever, daemon=True).start()
        count = steady_count = lambda: rsrv.count  # it stores nothing: received, then
        procs = [
            ctx.Process(target=_stdlib_client, args=(port, seconds, rate / clients, start_evt, out))
            for _ in range(clients)
        ]
    for p in procs:
        p.start()
        if PIN and p.pid is not None:
            os.sched_setaffinity(p.pid, cpus[1:] or cpus)
    time.sleep(1.5)  # let every child import and connect
    c0 = count()
    start_evt.set()
    t0 = time.perf_counter()
    # steady state: the middle of the run
    time.sleep(seconds * 0.25)
    a, ta = steady_count(), time.perf_counter()
    cpu_a = _cpu(procs)
    time.sleep(seconds * 0.5)
    b, tb = steady_count(), time.perf_counter()
    cpu_b = _cpu(procs)
    sent, costs, oks = 0, [], []
    for _ in range(2 * clients):
        item = out.get(timeout=300)
        if item[0] == "ok":
            oks.append(item[1])
        else:
            sent += item[0]
            costs.extend(item[1])
    for p in procs:
        p.join(60)
    t_done = time.perf_counter()
    deadline = time.time() + 60
    last, still = -1, time.time()
    while count() - c0 < sent and time.time() < deadline:
        if count() != last:
            last, still = count(), time.time()
        elif time.time() - still > 3.0:
            break  # nothing more is coming: the rest was lost on the way
        time.sleep(0.05)
    received = count() - c0
    stored = -1
    diagnostics = 0
    if kind == "mlgoodput":
        srv.stop()
        from mlgoodput.store import open_store

        st = open_store(f"{tmp}/bench.db")
        cols = st.read("mlgoodput.console", "bench").columns
        # the bench's own lines only: a client library line (a reconnect notice, say) travels
        # through the same logging and is stored too, but was never "sent" by the loop
        logs = [i for i, k in enumerate(cols.kinds) if k == 60]
        stored = sum(1 for i in logs if cols.name(i) == "bench")
        diagnostics = len(logs) - stored
        st.close()
        shutil.rmtree(tmp, ignore_errors=True)
    else:
        rsrv.shutdown()
        rsrv.server_close()
        shutil.rmtree(tmp, ignore_errors=True)
    os.sched_setaffinity(0, cpus)
    return {
        "server_cpu": (cpu_b[0] - cpu_a[0]) / (tb - ta),
        "clients_cpu": (cpu_b[1] - cpu_a[1]) / (tb - ta),
        "steady_rps": (b - a) / (tb - ta),
        "overall_rps": received / (t_done - t0),
        "sent": sent,
        "received": received,
        "stored": stored,
        "diagnostics": diagnostics,
        "lost": sent - (stored if stored >= 0 else received),
        "median_us": statistics.median(costs) * 1e6,
        "p99_us": sorted(costs)[int(len(costs) * 0.99)] * 1e6,
        "all_acked": float(all(oks)),
    }


def _cpu(procs: list[Any]) -> tuple[float, float]:
    """CPU seconds used so far by the server's side (this process and its store helper; the
    client processes are left out) and by the clients."""
    import psutil

    me = psutil.Process()
    clients = {p.pid for p in procs}
    server = clients_cpu = 0.0
    for p in [me, *me.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        if p.pid in clients:
            clients_cpu += t.user + t.system
        else:
            server += t.user + t.system
    return server, clients_cpu


def _raw_sender(path: str, client: int, frames: int, start_evt: mp.synchronize.Event) -> None:
    """Sends pre-encoded batches of log records, to load the server without the cost of logging."""
    import socket

    from mlgoodput.console import _protocol as P

    recs = [
        P.LogRec(time.time(), 20, "bench", f"step {i} loss 0.500", "/bench/bench_console.py", 42) for i in range(4096)
    ]
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)

    def exact(n: int) -> bytes:
        b = b""
        while len(b) < n:
            b += s.recv(n - len(b))
        return b

    P.decode_server(exact(P.frame_length(exact(4))))
    s.sendall(P.frame(P.Hello(P.VERSION, client, os.getpid(), "bench", "raw", b"")))
    P.decode_server(exact(P.frame_length(exact(4))))
    data = [P.frame(P.Batch(i * len(recs), recs)) for i in range(frames)]
    start_evt.wait()
    for d in data:
        s.sendall(d)
    time.sleep(120)  # keep the connection until the parent is done


def _server_alone(clients: int, frames: int) -> dict[str, float]:
    from mlgoodput.console import ConsoleServer

    ctx = mp.get_context("spawn")
    tmp = tempfile.mkdtemp()
    srv = ConsoleServer(
        f"unix:{tmp}/raw.sock", job="raw", store=f"{tmp}/raw.db", display=False, store_process=STORE_PROCESS
    )
    srv.start()
    start_evt = ctx.Event()
    procs = [
        ctx.Process(target=_raw_sender, args=(f"{tmp}/raw.sock", 1000 + k, frames, start_evt), daemon=True)
        for k in range(clients)
    ]
    for p in procs:
        p.start()
    wait = time.time() + 60
    while len([c for c in srv.clients.values() if c.connected]) < clients and time.time() < wait:
        time.sleep(0.05)
    total = clients * frames * 4096
    t0 = time.perf_counter()
    start_evt.set()
    while srv.sink.stored_events < total and time.perf_counter() - t0 < 120:
        time.sleep(0.005)
    dt = time.perf_counter() - t0
    stored = srv.sink.stored_events
    for p in procs:
        p.terminate()
    srv.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    return {"rps": stored / dt, "stored": stored, "total": total}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=4.0)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--rate", type=float, default=100_000, help="offered records/s in total for the paced rows")
    ap.add_argument("--only", choices=["mlgoodput", "stdlib"])
    ap.add_argument("--repeat", type=int, default=3, help="runs per row; the table shows the median run")
    ap.add_argument("--in-process-store", action="store_true", help="write the store on the server's own thread")
    ap.add_argument(
        "--pin",
        action="store_true",
        help="the receiving side on the first CPU, the clients on the others: how the server"
        " scales with clients when they cannot take its CPU (as on a host of its own)",
    )
    a = ap.parse_args(argv)
    global STORE_PROCESS, PIN
    STORE_PROCESS = not a.in_process_store
    PIN = a.pin
    if PIN and len(os.sched_getaffinity(0)) < 2:
        ap.error("--pin needs at least 2 CPUs")
    rows = []
    for rate in (a.rate, 0.0):
        for kind in ("mlgoodput", "stdlib"):
            if a.only and a.only != kind:
                continue
            runs = sorted(
                (_run(kind, a.clients, a.seconds, rate) for _ in range(a.repeat)), key=lambda r: r["steady_rps"]
            )
            r = dict(runs[len(runs) // 2])  # the median run by steady rate
            r["lo"], r["hi"] = runs[0]["steady_rps"], runs[-1]["steady_rps"]
            r["lost"] = max(x["lost"] for x in runs)
            r["extra"] = max(-x["lost"] for x in runs)  # stored beyond sent: must be 0
            r["diagnostics"] = max(x.get("diagnostics", 0) for x in runs)
            rows.append((kind, rate, r))
    print(
        f"\nconsole bench: {a.clients} client processes, {a.seconds:g} s of logging.info per run, median of {a.repeat} runs,"
        f" {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (other work on the machine)"
    )
    print("lost: most records missing in any run (sent minus stored; the stdlib receiver stores nothing, so received)")
    print(
        "offered: records/s asked of the clients in total (max: as fast as they can); steady: records stored a second"
        " in the middle half (received, for the stdlib receiver, which stores nothing); overall: until all are in"
    )
    if PIN:
        print("pinned: the server and its store helper on CPU 0, the clients on the other CPUs")
    print(
        "CPU: CPU-seconds a second in the steady window, of the receiving side (server and its"
        " store helper) and of all clients together"
    )
    hdr = f"{'receiver':<34} {'offered':>8} {'steady rec/s':>12} {'overall rec/s':>13} {'sent':>9} {'received':>9} {'stored':>9} {'lost':>6} {'call p50 µs':>11} {'call p99 µs':>11} {'steady range':>17} {'server CPU':>10} {'client CPU':>10}"
    names = {
        "mlgoodput": "mlgoodput.console (msgpack, acked)" if STORE_PROCESS else "mlgoodput.console (in-process store)",
        "stdlib": "stdlib SocketHandler + pickle rcv",
    }
    if not a.only:
        cap = _server_alone(a.clients, 10)
        print(
            f"\nserver alone (pre-encoded batches from {a.clients} raw senders): {cap['rps']:,.0f} records/s"
            f" received and stored into SQLite ({int(cap['stored'])} stored of {int(cap['total'])} sent, with the"
            " server's own events: its start and each sender's connection)"
        )
    print()
    print(hdr)
    print("-" * len(hdr))
    for kind, rate, r in rows:
        stored = f"{int(r['stored']):>9}" if r["stored"] >= 0 else f"{'n/a':>9}"
        offered = f"{rate:,.0f}" if rate else "max"
        print(
            f"{names[kind]:<34} {offered:>8} {r['steady_rps']:>12,.0f} {r['overall_rps']:>13,.0f} {int(r['sent']):>9} {int(r['received']):>9} {stored} {int(r['lost']):>6} {r['median_us']:>11.2f} {r['p99_us']:>11.2f} {r['lo'] / 1000:>7.0f}k–{r['hi'] / 1000:.0f}k {r['server_cpu']:>10.2f} {r['clients_cpu']:>10.2f}"
        )
    for kind, rate, r in rows:
        if kind == "mlgoodput":
            print(
                f"mlgoodput, offered {rate:,.0f}/s" if rate else "mlgoodput, offered max",
                f": stored beyond sent (duplicates) {int(r['extra'])}, client-library diagnostic lines"
                f" stored besides {int(r['diagnostics'])}",
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
