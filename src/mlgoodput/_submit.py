"""Where a scheduler leaves the time a job was submitted: an environment variable, Slurm.

Read only when `GoodputRecorder.record_job_submit_time()` is called without a time. Every
reader returns (UNIX seconds, source) or None; none of them raises.
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping

#: Submit time of this job (attempt): ISO 8601 (naive means local time) or UNIX seconds.
#: On Kubernetes, set it in the JobSet/Job spec when submitting, or map an annotation into it
#: through the downward API (`fieldRef: metadata.annotations['...']`).
SUBMIT_TIME = "MLGOODPUT_JOB_SUBMIT_TIME"


def parse_time(text: str) -> float | None:
    """ISO 8601 (a trailing Z is UTC; naive is local time) or UNIX seconds; None if neither."""
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def from_env(env: Mapping[str, str]) -> tuple[float, str] | None:
    raw = env.get(SUBMIT_TIME)
    if raw is None:
        return None
    t = parse_time(raw)
    if t is None:
        return None
    return t, ("kubernetes" if env.get("KUBERNETES_SERVICE_HOST") else "env")


def scontrol_submit_time(job_id: str, timeout_s: float = 2.0) -> float | None:
    """SubmitTime of a Slurm job as `scontrol show job` prints it (local time), or None."""
    exe = shutil.which("scontrol")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, "show", "job", "-o", job_id], capture_output=True, text=True,
                             timeout=timeout_s, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return slurm_field(out, "SubmitTime")


def slurm_field(text: str, key: str) -> float | None:
    """The time of `Key=2024-05-01T10:00:00` in `scontrol show job -o` output."""
    for part in text.split():
        k, _, v = part.partition("=")
        if k == key and v not in ("", "None", "Unknown"):
            return parse_time(v)
    return None


def from_slurm(env: Mapping[str, str],
               submit_of: Callable[[str], float | None] = scontrol_submit_time) -> tuple[float, str] | None:
    """A Slurm job's submit time: $SLURM_JOB_SUBMIT_TIME where a site exports it, else scontrol."""
    raw = env.get("SLURM_JOB_SUBMIT_TIME")
    if raw is not None and (t := parse_time(raw)) is not None:
        return t, "slurm"
    job = env.get("SLURM_JOB_ID")
    if not job:
        return None
    t2 = submit_of(job)
    return None if t2 is None else (t2, "slurm")


def detect_submit_time(env: Mapping[str, str] | None = None,
                       submit_of: Callable[[str], float | None] = scontrol_submit_time) -> tuple[float, str] | None:
    """$MLGOODPUT_JOB_SUBMIT_TIME, else Slurm's submit time, else None."""
    e = os.environ if env is None else env
    return from_env(e) or from_slurm(e, submit_of)
