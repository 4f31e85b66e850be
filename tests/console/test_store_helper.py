"""The console's store helper process: what it runs with, and its own garbage collection."""

from __future__ import annotations

import gc
import io
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from mlgoodput.console import _protocol as P
from mlgoodput.console import _storeproc as S


@pytest.mark.slow
def test_the_store_helper_runs_with_one_blas_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    sp = S.StoreProcess(f"sqlite:///{tmp_path}/s.db", "job")
    sp.start()
    try:
        deadline = time.monotonic() + 30
        while sp._proc is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sp._proc is not None
        env = Path(f"/proc/{sp._proc.pid}/environ").read_bytes().split(b"\0")
        assert b"OPENBLAS_NUM_THREADS=1" in env
    finally:
        assert sp.close(30)


@pytest.mark.slow
def test_the_store_helper_collects_garbage_on_its_clock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Automatic collection is off in the helper (pending records' dicts would be walked over
    and over); it collects every GC_EVERY_S instead, so cycles are still freed."""
    recs = [P.LogRec(1.0e9 + i, 20, "t", f"line {i}", "f.py", 1) for i in range(10)]
    body = P.frame(P.Batch(0, recs))[4:]
    host = b"host"
    data = S.HEADER.pack(S.HOST, 7, 0, 0, 1, len(host)) + host
    data += S.HEADER.pack(S.RAW, 7, 0, 0, 0, len(body)) + body
    data += S.HEADER.pack(S.RAW, 7, 10, 0, 0, len(body)) + body  # the next ten (same texts)
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdin", SimpleNamespace(buffer=io.BytesIO(data)))
    monkeypatch.setattr(sys, "stdout", SimpleNamespace(buffer=out))
    monkeypatch.setattr(S, "GC_EVERY_S", 0.0)
    collected: list[bool] = []
    real_collect = gc.collect
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(gc.isenabled()) or real_collect(*a))
    try:
        assert S.child_main(f"sqlite:///{tmp_path}/g.db", "job") == 0
    finally:
        gc.enable()
    assert collected and not any(collected)  # collected by hand, with automatic collection off
    acks = [S.ACK.unpack_from(out.getvalue(), i) for i in range(0, len(out.getvalue()), S.ACK.size)]
    assert acks and acks[-1] == (7, 20)
