"""The demo supervisor: runs a workload process, kills it for real midway and restarts it;
the caller (`mlgoodput._cli.demo`) then prints the goodput report of the whole job.

A workload is any module run as `python -m MODULE --store URL --job JOB --ckpt-dir DIR
--steps N --time-scale F` that records with the public recorder API, restores from the
newest checkpoint in DIR when it restarts, and prints one JSON object per line on stdout
with at least `phase` ("start", "init", "prep", "restore", "step", "eval", "checkpoint",
"done") and, for steps, `step` and `steps`. The default is `mlgoodput._demo.workload_jax`
(a real JAX job) when JAX, Orbax and Optax are installed, else `mlgoodput._demo.workload_sim`.
A workload that says where it wrote TensorBoard files (`tensorboard_dir` in its "start"
message) gets a line on how to open them after the report.

Every demo keeps its own job name (`demo` for the JAX workload, `demo-sim` for the simulated
one, `demo-torch` for torchrun) in one store, `demo-output/demo.db`: running a demo again
replaces its own job and its own folder `demo-output/JOB/` (checkpoints, TensorBoard files)
and leaves the other demos' alone. The attempts run inside a console session named after
the job, so the workload's log lines and the supervisor's notes are the job's console.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from mlgoodput import _env
from mlgoodput._demo._store import forget_job
from mlgoodput._recovery import recover_journals
from mlgoodput._spawn import start_python
from mlgoodput.store import resolve_store_url, store_file

DEFAULT_WORKLOAD = "mlgoodput._demo.workload_sim"
JAX_WORKLOAD = "mlgoodput._demo.workload_jax"
DEMO_DB = "demo.db"  # the one store of every demo, in the output folder
log = logging.getLogger("demo")


def default_job(workload: str) -> str:
    """The demo's job name for a workload: `demo` (JAX), `demo-sim`, else `demo-<module>`."""
    if workload == JAX_WORKLOAD:
        return "demo"
    return "demo-" + workload.rsplit(".", 1)[-1].removeprefix("workload_")


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
    store: str | None = None  # default: output_dir/demo.db, where this job replaces its old self
    job: str = ""  # default: default_job(workload)
    workload: str = field(default_factory=default_workload)
    steps: int = 100
    kill_at_step: int | None = None  # default: just past the middle
    time_scale: float = 1.0
    restart_delay_s: float = 2.0

    def __post_init__(self) -> None:
        if not self.job:
            object.__setattr__(self, "job", default_job(self.workload))
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
        log.info("%s", text)  # into the job's console while its session is open


@dataclass(frozen=True, slots=True)
class DemoResult:
    """Where a demo's job is, and what went wrong (`error`, one line) if an attempt failed."""

    job: str
    store: str
    error: str | None = None
    tensorboard_dir: str | None = None


def prepare(output_dir: Path, store: str | None, job: str, out: IO[str]) -> tuple[str, Path]:
    """(store URL, the job's own folder): the default store is `output_dir/demo.db`, shared by
    every demo, where this job's earlier run and its folder are removed (nothing else is)."""
    workdir = output_dir / job
    if store is not None:
        return resolve_store_url(store), workdir
    output_dir.mkdir(parents=True, exist_ok=True)
    url = resolve_store_url(str(output_dir.resolve() / DEMO_DB))
    recover_journals(url)  # what an earlier demo left unshipped goes in before its job is removed
    if forget_job(url, job):
        out.write(f"replacing the earlier demo job {job!r} in {store_file(url) or url}\n")
    shutil.rmtree(workdir, ignore_errors=True)
    return url, workdir


@contextlib.contextmanager
def console_session(job: str, url: str, out: IO[str]) -> Iterator[None]:
    """The job's console session around the attempts (none when the console's extra is
    missing: the demo says so and goes on)."""
    try:
        from mlgoodput import console
    except ImportError as e:
        out.write(f"(no console job: {e})\n")
        yield
        return
    with console.session(job=job, store=url, display=False):
        yield


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
    env = {"PYTHONUNBUFFERED": "1", _env.JOB_SUBMIT_TIME: repr(time.time())}
    if _env.CPU_PEAK_FLOPS not in os.environ:
        env[_env.CPU_PEAK_FLOPS] = DEMO_CPU_PEAK_FLOPS
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


def run_demo(cfg: DemoConfig, out: IO[str] | None = None) -> DemoResult:
    """Run both attempts of the demo job; its report is the caller's."""
    out = out or sys.stdout
    ui = _Progress(out)
    url, workdir = prepare(cfg.output_dir, cfg.store, cfg.job, out)
    ckpt = workdir / "checkpoints"
    kill_at = cfg.kill_at_step if cfg.kill_at_step is not None else cfg.steps // 2 + 5
    ui.note(f"mlgoodput demo: job {cfg.job!r}, workload {cfg.workload}, store {url}")
    seen: dict[str, Any] = {}
    with console_session(cfg.job, url, out):
        t0 = time.monotonic()
        rc = _attempt(cfg, url, ckpt, 1, kill_at, ui)
        if rc != -signal.SIGKILL:
            return DemoResult(cfg.job, url, f"the first attempt ended with exit code {rc} before it could be killed")
        ui.note(f"restarting in {cfg.restart_delay_s * cfg.time_scale:.1f} s (infrastructure recovery) ...")
        time.sleep(cfg.restart_delay_s * cfg.time_scale)
        rc = _attempt(cfg, url, ckpt, 2, None, ui, seen)
        if rc != 0:
            return DemoResult(cfg.job, url, f"the restarted worker failed with exit code {rc}")
        ui.note(f"both attempts took {time.monotonic() - t0:.1f} s of wall time")
    shipped = recover_journals(url)  # the restarted worker already shipped the killed one's journal
    if shipped:
        ui.note(f"recovered {shipped} journaled events")
    return DemoResult(cfg.job, url, tensorboard_dir=seen.get("tensorboard_dir"))


def next_steps(job: str, url: str, tensorboard_dir: str | None) -> str:
    """The commands to try after a demo, exactly as they run in this environment."""
    path = store_file(url) or url
    lines = ["", f"Next, try these (every demo keeps its job in this store; this one is {job!r}):"]
    bindir = os.path.dirname(sys.executable)
    on_path = shutil.which("mlgoodput")
    if on_path is None or os.path.dirname(os.path.abspath(on_path)) != bindir:
        activate = os.path.join(bindir, "activate")
        if os.path.exists(activate):
            rel = os.path.relpath(activate)
            lines.append(
                f"  source {activate if rel.startswith('..') else rel}   # puts mlgoodput and tensorboard on the PATH"
            )
    cmds = [
        (f"export MLGOODPUT_STORE={path}", ""),
        ("mlgoodput jobs", "goodput, duration and status of each job"),
        (f"mlgoodput report --job {job} --window 30", "the last 30 s of the job"),
        ("mlgoodput runs", "its ML run: configs and the loss"),
        (f"mlgoodput console logs --job {job}", "its logs, from every process"),
        ("mlgoodput ui", f"then open http://127.0.0.1:8787/jobs/{quote(job, safe='')}"),
    ]
    if tensorboard_dir:
        cmds.append((f"tensorboard --logdir {tensorboard_dir}", "then open http://localhost:6006"))
    width = max(len(c) for c, why in cmds if why)
    lines += [f"  {c.ljust(width)}   # {why}" if why else f"  {c}" for c, why in cmds]
    return "\n".join(lines)
