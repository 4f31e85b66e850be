"""A job's labels and size for the fleet view: what a user passes, `$MLGOODPUT_LABELS`, and what a
scheduler already says (Slurm, Kubernetes), plus how many accelerators the job holds.

Read when a recorder is made or an attempt starts, never on the training loop's hot path. The
fleet view (accounting/_fleet.py) groups jobs by these labels and weights them by accelerators.
"""

from __future__ import annotations

import operator
import os
import re
import sys
from collections.abc import Mapping

from mlgoodput import _env

#: A label key: what Prometheus and most dashboards accept as a label name, so a key groups alike
#: everywhere (letters, digits, '_', '.', '-'; not starting with a digit).
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,62}")
MAX_VALUE = 200  # characters of one label value
MAX_LABELS = 32

#: Where a Kubernetes pod reads its own namespace.
K8S_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

#: The scheduler's variables a job is labelled with where they are set: (variable, label).
SCHEDULER_VARS: tuple[tuple[str, str], ...] = (
    ("SLURM_JOB_ACCOUNT", "slurm_account"),
    ("SLURM_JOB_PARTITION", "slurm_partition"),
    ("SLURM_CLUSTER_NAME", "slurm_cluster"),
    ("POD_NAMESPACE", "k8s_namespace"),
    ("JOBSET_NAME", "jobset"),
)


def check_labels(labels: object, arg: str = "labels") -> dict[str, str]:
    """Labels given by a caller (a mapping, or "k=v,k2=v2" text) as a checked dict; a TypeError or
    ValueError naming `arg` and the offending key or value."""
    if labels is None:
        return {}
    if isinstance(labels, str):
        return parse_labels(labels, arg)
    if not isinstance(labels, Mapping):
        raise TypeError(f"{arg} must be a mapping of label to value or 'key=value,...' text, got {labels!r}")
    out: dict[str, str] = {}
    for k, v in labels.items():
        key = _check_key(k, arg)
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise TypeError(f"{arg}[{key!r}] must be a string (or a number), got {v!r}")
        text = str(v).strip()
        if not text or len(text) > MAX_VALUE:
            raise ValueError(f"{arg}[{key!r}] must be 1 to {MAX_VALUE} characters, got {v!r}")
        out[key] = text
    if len(out) > MAX_LABELS:
        raise ValueError(f"{arg}: at most {MAX_LABELS} labels, got {len(out)}")
    return out


def parse_labels(text: str, arg: str = "$" + _env.LABELS) -> dict[str, str]:
    """ "team=nlp,model=llama-8b" as a dict (spaces around items are dropped; empty items skipped)."""
    out: dict[str, str] = {}
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"{arg}: expected key=value items separated by commas, got {item!r}")
        out[key.strip()] = value.strip()
    return check_labels(out, arg)


def scheduler_labels(env: Mapping[str, str] | None = None, namespace_file: str = K8S_NAMESPACE_FILE) -> dict[str, str]:
    """What the scheduler says of this job: Slurm's account, partition and cluster, the Kubernetes
    namespace ($POD_NAMESPACE, else the pod's service-account file) and a JobSet's name
    ($JOBSET_NAME, from the pod's `jobset.sigs.k8s.io/jobset-name` label through the downward API)."""
    env = os.environ if env is None else env
    out: dict[str, str] = {}
    for var, label in SCHEDULER_VARS:
        v = env.get(var, "").strip()
        if v and len(v) <= MAX_VALUE:
            out[label] = v
    if "k8s_namespace" not in out and env.get("KUBERNETES_SERVICE_HOST"):
        try:
            with open(namespace_file, encoding="utf-8") as f:
                ns = f.read(MAX_VALUE + 1).strip()
        except OSError:
            ns = ""
        if ns and len(ns) <= MAX_VALUE:
            out["k8s_namespace"] = ns
    return out


def job_labels(given: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The labels a job records: the scheduler's, then `$MLGOODPUT_LABELS`, then the given ones
    (each later source wins on a key). A malformed variable raises ValueError naming it."""
    env = os.environ if env is None else env
    out = scheduler_labels(env)
    raw = env.get(_env.LABELS, "")
    if raw.strip():
        out.update(parse_labels(raw))
    if given:
        out.update(given)
    if len(out) > MAX_LABELS:
        raise ValueError(
            f"labels: at most {MAX_LABELS} labels, got {len(out)} from the scheduler, ${_env.LABELS} and the"
            f" argument together ({', '.join(sorted(out))})"
        )
    return out


def check_accelerators(value: object, arg: str = "accelerators") -> int | None:
    """A count of accelerators: a positive whole number, or None (unknown)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            raise TypeError(f"{arg} must be a positive whole number, got {value!r}") from None
    if value <= 0:
        raise ValueError(f"{arg} must be a positive whole number, got {value!r}")
    return int(value)


def detect_accelerators(env: Mapping[str, str] | None = None) -> tuple[int | None, str | None]:
    """(how many accelerators the whole job holds, their kind), from `$MLGOODPUT_ACCELERATORS`, else
    a JAX runtime already initialized on an accelerator backend, else torch with CUDA already
    initialized (its devices on this host times the hosts of a torchrun/Slurm job); (None, kind)
    if unknown. Never imports nor initializes a framework (that would cost seconds, start one the
    job does not use, or break its later distributed initialization or fork)."""
    env = os.environ if env is None else env
    kind = env.get(_env.ACCELERATOR_TYPE, "").strip() or None
    raw = env.get(_env.ACCELERATORS, "").strip()
    if raw:
        try:
            return check_accelerators(int(raw), "$" + _env.ACCELERATORS), kind
        except (TypeError, ValueError):
            raise ValueError(f"${_env.ACCELERATORS} must be a positive whole number, got {raw!r}") from None
    jax = sys.modules.get("jax")
    xb = sys.modules.get("jax._src.xla_bridge")
    ready = getattr(xb, "backends_are_initialized", None)
    if jax is not None and ready is not None:
        try:
            # only a runtime the job already started: asking an idle one would initialize its
            # backends before the job's jax.distributed.initialize(), which then fails
            if ready() and jax.default_backend() != "cpu":
                devs = jax.devices()
                return len(devs), kind or str(getattr(devs[0], "device_kind", "")) or None
        except Exception:  # a JAX we do not understand: not known here
            pass
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            # CUDA already initialized by the job: starting it here would break a later fork
            if torch.cuda.is_initialized():
                local = int(torch.cuda.device_count())
                world = _int(env.get("WORLD_SIZE")) or _int(env.get("SLURM_NTASKS"))
                per = _int(env.get("LOCAL_WORLD_SIZE")) or _int(env.get("SLURM_NTASKS_PER_NODE"))
                nodes = _int(env.get("SLURM_JOB_NUM_NODES")) or _int(env.get("GROUP_WORLD_SIZE"))
                if world and per:
                    nodes = max(1, world // per)
                # each rank sees its node's devices (devices x nodes), or only its own (one a
                # rank: CUDA_VISIBLE_DEVICES or --gpus-per-task): the larger is the job's
                return max(local * (nodes or 1), world or 0), kind or str(torch.cuda.get_device_name(0))
        except Exception:  # a driver that fails: not known here
            pass
    return None, kind


def _int(text: str | None) -> int | None:
    try:
        v = int(text) if text else 0
    except ValueError:
        return None
    return v if v > 0 else None


def _check_key(k: object, arg: str) -> str:
    if not isinstance(k, str) or not _KEY.fullmatch(k.strip()):
        raise ValueError(
            f"{arg}: label key {k!r} must start with a letter or '_' and hold only letters, digits,"
            " '_', '.' or '-' (at most 63 characters)"
        )
    return k.strip()
