"""The demo supervisor: runs a workload process, kills it for real midway, restarts it,
and prints the goodput report of the whole job.

A workload is any module run as `python -m MODULE --store URL --job JOB --ckpt-dir DIR
--steps N --time-scale F` that records with the public recorder API, restores from the
newest checkpoint in DIR when it restarts, and prints one JSON object per line on stdout
with at least `phase` ("start", "init", "prep", "restore", "step", "eval", "checkpoint",
"done") and, for steps, `step` and `steps`. The default is `mlgoodput._demo.workload_jax`
(a real JAX job) when JAX, Orbax and Optax are installed, else `mlgoodput._demo.workload_sim`.
A workload that says where it wrote TensorBoard files (`tensorboard_dir` in its "start"
message) gets a line on how to open them after the report.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from mlgoodput._journal import journal_dirs, recover_journals
from mlgoodput._spawn import start_python
from mlgoodput.store import open_store, resolve_store_url, store_file

DEFAULT_WORKLOAD = "mlgoodput._demo.workload_sim"
JAX_WORKLOAD = "mlgoodput._demo.workload_jax"


def default_workload() -> str:
    """The JAX workload when its packages are installed, else the simulated one."""
    import importlib.util

    try:
        if all(importlib.util.find_spec(m) is not None for m in ("jax", "orbax.checkpoint", "optax")):
            return JAX_WORKLOAD
    except (ImportError, ValueError):
        pass
    return DEFAULT_WORKLOAD


@dataclass(frozen=True, slots=True)
class DemoConfig:
    """What the demo runs; durations scale with `time_scale`."""

    output_dir: Path = Path("demo-output")
    store: str | None = None  # default: a fresh SQLite file in output_dir
    job: str = "demo"
    workload: str = field(default_factory=default_workload)
    steps: int = 100
    kill_at_step: int | None = None  # default: just past the middle
    time_scale: float = 1.0
    restart_delay_s: float = 2.0

    def __post_init__(self) -> None:
        if self.steps < 4:
            raise ValueError(f"steps must be at least 4, got {self.steps!r}")
        if not self.time_scale > 0:
            raise ValueError(f"time_scale must be > 0, got {self.time_scale!r}")
        if self.kill_at_step is not None and not 0 < self.kill_at_step < self.steps - 1:
            raise ValueError(f"kill_at_step must be between 1 and steps - 2, got {self.kill_at_step!r}")


class _Progress:
    """One live status line on a terminal; a line every few steps elsewhere."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out
        self.tty = out.isatty()
        self.last_line = ""

    def show(self, attempt: int, msg: dict[str, Any]) -> None:
        phase = msg.get("phase")
        if phase == "step":
            step, total = int(msg["step"]), int(msg["steps"])
            width = 30
            filled = int(width * (step + 1) / total)
            line = (
                f"attempt {attempt}  [{'#' * filled}{'.' * (width - filled)}] step {step + 1}/{total}"
                f"  loss {msg.get('loss', '')}"
            )
            if self.tty:
                self.out.write("\r" + line.ljust(len(self.last_line)))
                self.last_line = line
            elif step % 10 == 0:
                self.out.write(line + "\n")
        else:
            detail = f" (step {msg['step']})" if "step" in msg else ""
            self.note(f"attempt {attempt}: {phase}{detail}")
        self.out.flush()

    def note(self, text: str) -> None:
        if self.tty and self.last_line:
            self.out.write("\n")
            self.last_line = ""
        self.out.write(text + "\n")
        self.out.flush()


def _fresh_store(cfg: DemoConfig) -> str:
    if cfg.store is not None:
        return resolve_store_url(cfg.store)
    cfg.output_dir.mkdir(parents=True, exist_ok=True)
    db = cfg.output_dir.resolve() / "demo.db"
    url = resolve_store_url(str(db))
    for p in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
        p.unlink(missing_ok=True)
    for d in journal_dirs(url):
        shutil.rmtree(d, ignore_errors=True)
    return url


#: The CPU peak the demo configures for MFU (unless $MLGOODPUT_CPU_PEAK_FLOPS is set): 100 GFLOP/s,
#: about what two AVX2 cores at 3 GHz reach in float32 (2 FMA units x 8 lanes x 2 FLOPs a cycle).
DEMO_CPU_PEAK_FLOPS = "1e11"


def _attempt(
    cfg: DemoConfig,
    url: str,
    ckpt: Path,
    attempt: int,
    kill_at: int | None,
    ui: _Progress,
    seen: dict[str, Any] | None = None,
) -> int:
    cmd = [
        "-m",
        cfg.workload,
        "--store",
        url,
        "--job",
        cfg.job,
        "--ckpt-dir",
        str(ckpt),
        "--steps",
        str(cfg.steps),
        "--time-scale",
        str(cfg.time_scale),
    ]
    # the supervisor "submits" each attempt now
    env = {"PYTHONUNBUFFERED": "1", "MLGOODPUT_JOB_SUBMIT_TIME": repr(time.time())}
    if "MLGOODPUT_CPU_PEAK_FLOPS" not in os.environ:
        env["MLGOODPUT_CPU_PEAK_FLOPS"] = DEMO_CPU_PEAK_FLOPS
    p = start_python(cmd, extra_env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    try:
        for raw in p.stdout:
            try:
                msg = json.loads(raw)
            except ValueError:
                ui.note(raw.rstrip())
                continue
            if not isinstance(msg, dict):
                continue
            ui.show(attempt, msg)
            if seen is not None and isinstance(msg.get("tensorboard_dir"), str):
                seen["tensorboard_dir"] = msg["tensorboard_dir"]
            if kill_at is not None and msg.get("phase") == "step" and int(msg["step"]) >= kill_at:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
                ui.note(
                    f"attempt {attempt}: worker {p.pid} killed with SIGKILL after step {msg['step']}"
                    " (no clean shutdown, no flush)"
                )
                return p.returncode
        return p.wait()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def run_demo(cfg: DemoConfig, out: IO[str] | None = None) -> int:
    """Run the demo; returns the exit code of the report (0 when all went well)."""
    out = out or sys.stdout
    ui = _Progress(out)
    url = _fresh_store(cfg)
    ckpt = cfg.output_dir / "checkpoints"
    if cfg.store is None:
        shutil.rmtree(ckpt, ignore_errors=True)
    kill_at = cfg.kill_at_step if cfg.kill_at_step is not None else cfg.steps // 2 + 5
    ui.note(f"mlgoodput demo: job {cfg.job!r}, workload {cfg.workload}, store {url}")
    t0 = time.monotonic()
    rc = _attempt(cfg, url, ckpt, 1, kill_at, ui)
    if rc != -signal.SIGKILL:
        ui.note(f"the first attempt ended with exit code {rc} before it could be killed")
        return 1
    ui.note(f"restarting in {cfg.restart_delay_s * cfg.time_scale:.1f} s (infrastructure recovery) ...")
    time.sleep(cfg.restart_delay_s * cfg.time_scale)
    seen: dict[str, Any] = {}
    rc = _attempt(cfg, url, ckpt, 2, None, ui, seen)
    if rc != 0:
        ui.note(f"the restarted worker failed with exit code {rc}")
        return 1
    ui.note(f"both attempts took {time.monotonic() - t0:.1f} s of wall time")
    shipped = recover_journals(url)  # the restarted worker already shipped the killed one's journal
    if shipped:
        ui.note(f"recovered {shipped} journaled events")
    rc = _report(cfg.job, url, ui)
    if rc == 0:
        _advise(cfg.job, url, ui)
    ui.note(next_steps(cfg.job, url, seen.get("tensorboard_dir")))
    return rc


def _advise(job: str, url: str, ui: _Progress) -> None:
    """The checkpoint-interval advice for the demo job (`mlgoodput advise`)."""
    from mlgoodput import cli

    argv = ["advise", "--job", job, "--store", url]
    ui.note("\n$ mlgoodput " + " ".join(argv))
    try:
        cli.main(argv)
    except ImportError:
        pass


def next_steps(job: str, url: str, tensorboard_dir: str | None) -> str:
    """The commands to try after the demo, exactly as they run in this environment."""
    path = store_file(url) or url
    lines = ["", "Next, try these (the demo's job is in its own store):"]
    bindir = os.path.dirname(sys.executable)
    on_path = shutil.which("mlgoodput")
    if on_path is None or os.path.dirname(os.path.abspath(on_path)) != bindir:
        activate = os.path.join(bindir, "activate")
        if os.path.exists(activate):
            rel = os.path.relpath(activate)
            lines.append(
                f"  source {activate if rel.startswith('..') else rel}   # puts mlgoodput and tensorboard on the PATH"
            )
    lines.append(f"  export MLGOODPUT_STORE={path}")
    lines.append("  mlgoodput jobs                              # goodput, duration and status of each job")
    lines.append(f"  mlgoodput report --job {job} --window 30     # the last 30 s of the job")
    lines.append(
        f"  mlgoodput ui                                # then open http://127.0.0.1:8787/jobs/{quote(job, safe='')}"
    )
    if tensorboard_dir:
        lines.append(f"  tensorboard --logdir {tensorboard_dir}   # then open http://localhost:6006")
    return "\n".join(lines)


def _report(job: str, url: str, ui: _Progress) -> int:
    from mlgoodput import cli

    argv = ["report", "--job", job, "--store", url]
    ui.note("\n$ mlgoodput " + " ".join(argv))
    try:
        return cli.main(argv)
    except ImportError:  # the report command is not in this build: print the calculator's report
        try:
            from mlgoodput._demo._render import render_report
            from mlgoodput.accounting import GoodputCalculator

            render_report(GoodputCalculator(job, f"goodput_{job}", store=url).report(), ui.out)
            return 0
        except ImportError:
            pass
        st = open_store(url)
        counts: dict[str, int] = {}
        for e in st.read(f"goodput_{job}", job).columns.events():
            counts[e.kind.name] = counts.get(e.kind.name, 0) + 1
        st.close()
        ui.note("(report command unavailable) events stored: " + ", ".join(f"{k}={v}" for k, v in counts.items()))
        return 0
