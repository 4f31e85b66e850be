"""Where a scheduler leaves the time a job was submitted: an environment variable, the
Kubernetes API (this pod's creation time), Slurm.

Read only when `GoodputRecorder.record_job_submit_time()` is called without a time. Every
reader returns (UNIX seconds, source) or None; none of them raises.
"""

from __future__ import annotations

import datetime as _dt
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping

from mlgoodput import _env

#: Submit time of this job (attempt): ISO 8601 (naive means local time) or UNIX seconds.
#: On Kubernetes, set it in the JobSet/Job spec when submitting, or map an annotation into it
#: through the downward API (`fieldRef: metadata.annotations['...']`).
SUBMIT_TIME = _env.JOB_SUBMIT_TIME


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


#: Where Kubernetes mounts a pod's service account (token, CA bundle, namespace).
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def pod_creation_time(
    env: Mapping[str, str],
    *,
    api_url: str | None = None,
    service_account_dir: str = SERVICE_ACCOUNT_DIR,
    timeout_s: float = 2.0,
) -> float | None:
    """This pod's `metadata.creationTimestamp` from the API server (the pod's service account
    must be allowed to get pods in its namespace), or None. The pod is $HOSTNAME unless
    $MLGOODPUT_POD_NAME names it; `api_url` defaults to the in-cluster address."""
    import json
    import ssl
    import urllib.request

    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT", "443")
    pod = env.get(_env.POD_NAME) or env.get("HOSTNAME")
    if not pod or (api_url is None and not host):
        return None
    try:
        with open(os.path.join(service_account_dir, "token")) as f:
            token = f.read().strip()
        with open(os.path.join(service_account_dir, "namespace")) as f:
            namespace = f.read().strip()
    except OSError:
        return None
    if api_url is None:
        h = f"[{host}]" if host and ":" in host else host
        api_url = f"https://{h}:{port}"
    ctx = None
    if api_url.startswith("https:"):
        ca = os.path.join(service_account_dir, "ca.crt")
        ctx = ssl.create_default_context(cafile=ca if os.path.exists(ca) else None)
    req = urllib.request.Request(
        f"{api_url.rstrip('/')}/api/v1/namespaces/{namespace}/pods/{pod}",
        headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout_s, context=ctx) as resp:
            body = json.loads(resp.read().decode())
        created = body["metadata"]["creationTimestamp"]
    except Exception:  # forbidden, unreachable, not JSON: no submit time from here
        return None
    return parse_time(str(created))


def from_kubernetes(env: Mapping[str, str], **kw: object) -> tuple[float, str] | None:
    t = pod_creation_time(env, **kw)  # type: ignore[arg-type]
    return None if t is None else (t, "kubernetes")


def scontrol_submit_time(job_id: str, timeout_s: float = 2.0) -> float | None:
    """SubmitTime of a Slurm job as `scontrol show job` prints it (local time), or None."""
    exe = shutil.which("scontrol")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "show", "job", "-o", job_id], capture_output=True, text=True, timeout=timeout_s, check=False
        ).stdout
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


def from_slurm(
    env: Mapping[str, str], submit_of: Callable[[str], float | None] = scontrol_submit_time
) -> tuple[float, str] | None:
    """A Slurm job's submit time: $SLURM_JOB_SUBMIT_TIME where a site exports it, else scontrol."""
    raw = env.get("SLURM_JOB_SUBMIT_TIME")
    if raw is not None and (t := parse_time(raw)) is not None:
        return t, "slurm"
    job = env.get("SLURM_JOB_ID")
    if not job:
        return None
    t2 = submit_of(job)
    return None if t2 is None else (t2, "slurm")


def detect_submit_time(
    env: Mapping[str, str] | None = None, submit_of: Callable[[str], float | None] = scontrol_submit_time
) -> tuple[float, str] | None:
    """$MLGOODPUT_JOB_SUBMIT_TIME, else this pod's creation time on Kubernetes, else Slurm's
    submit time, else None."""
    e = os.environ if env is None else env
    return from_env(e) or from_kubernetes(e) or from_slurm(e, submit_of)
