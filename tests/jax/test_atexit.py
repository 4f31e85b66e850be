"""`shutdown` runs at interpreter exit: the last totals are exported and the exporter process ends."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("jax", reason="JAX is an optional extra: pip install 'mlgoodput[jax]'")

from mlgoodput.testing import FileExporter

SRC = str(Path(__file__).resolve().parents[2] / "src")


@pytest.mark.slow
def test_exit_without_shutdown_exports_the_last_totals(tmp_path: Path) -> None:
    out = tmp_path / "samples.jsonl"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {SRC!r})
        import jax.monitoring
        import mlgoodput.jax as jm
        from mlgoodput.testing import FileExporter
        jm.init(job_name="atexit", exporters=[FileExporter({str(out)!r})],
                store={f"sqlite://{tmp_path}/s.db"!r}, interval_s=3600)
        for _ in range(123):
            jax.monitoring.record_event("/test/atexit")
        print(jm.current().sink.proc.pid, flush=True)
    """)
    r = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={"XDG_DATA_HOME": str(tmp_path / "xdg"), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0, r.stderr
    rows = FileExporter.read(out)
    values = [
        x["value"]
        for row in rows
        for x in row.get("samples", [])  # type: ignore[attr-defined]
        if x["name"] == "test/atexit"
    ]
    assert values and values[-1] == 123.0
    assert rows[-1].get("shutdown") is True
    child = int(r.stdout.split()[0])
    assert not Path(f"/proc/{child}").exists() or "zombie" in Path(f"/proc/{child}/status").read_text().lower()
