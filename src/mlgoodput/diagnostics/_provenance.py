"""Where a run came from, recorded at its start: git commit, command line, host, user,
Python and framework versions; and where it runs (a cloud region, only when detected).

Nothing here raises: a fact that cannot be found (no git, not a repository, no user name)
is left out of the record.
"""

from __future__ import annotations

import os
import platform
import shlex
import socket
import subprocess
import sys
from typing import Any

from mlgoodput._gcp_metadata import on_google_cloud

GIT_TIMEOUT_S = 2.0
#: frameworks, in the order a tie is broken when several are imported
FRAMEWORKS = ("jax", "torch", "tensorflow")
#: packages whose versions are recorded when imported or installed
VERSIONED = ("jax", "jaxlib", "torch", "flax", "optax", "tensorflow", "numpy")
#: the SDK's signature defaults, which are not facts about a run that is not on Google Cloud
SDK_REGION_DEFAULT = "us-central1"
SDK_ENVIRONMENT_DEFAULT = "prod"


def _run_git(args: list[str], cwd: str, timeout_s: float) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_state(cwd: str | None = None, timeout_s: float = GIT_TIMEOUT_S) -> dict[str, Any]:
    """{"commit", "dirty", "branch", "root"} of the repository holding `cwd` (default: the
    script's directory, else the working directory); {} without git or a repository."""
    where = cwd or _script_dir() or os.getcwd()
    head = _run_git(["rev-parse", "HEAD", "--abbrev-ref", "HEAD", "--show-toplevel"], where, timeout_s)
    if head is None:
        return {}
    lines = head.strip().splitlines()
    if len(lines) < 3:
        return {}
    out: dict[str, Any] = {"commit": lines[0], "branch": None if lines[1] == "HEAD" else lines[1], "root": lines[2]}
    status = _run_git(["status", "--porcelain", "--untracked-files=no"], where, timeout_s)
    out["dirty"] = None if status is None else bool(status.strip())
    return out


def _script_dir() -> str | None:
    arg0 = sys.argv[0] if sys.argv else ""
    if arg0 and arg0 not in ("-c", "-m") and os.path.isfile(arg0):
        return os.path.dirname(os.path.abspath(arg0))
    return None


def _user() -> str | None:
    import getpass

    try:
        return getpass.getuser()
    except Exception:  # no login name, no USER variable, no passwd entry (a container)
        return None


def imported_frameworks() -> list[str]:
    """The frameworks this process has imported, in FRAMEWORKS order."""
    return [m for m in FRAMEWORKS if m in sys.modules]


def framework_in_use(preferred: str | None = None) -> str | None:
    """The framework the program uses: the one it imported (`preferred` when it imported
    several and that is one of them); None when it imported none (never a default)."""
    used = imported_frameworks()
    if preferred in used:
        return preferred
    return used[0] if used else None


def package_versions(names: tuple[str, ...] = VERSIONED) -> dict[str, str]:
    """Versions of the packages that are imported or installed (importlib.metadata)."""
    from importlib import metadata

    out: dict[str, str] = {}
    for pkg in names:
        v: str | None = None
        try:
            v = metadata.version(pkg)
        except Exception:  # not installed (or broken metadata)
            mod = sys.modules.get(pkg)
            got = getattr(mod, "__version__", None) if mod is not None else None
            v = got if isinstance(got, str) else None
        if v:
            out[pkg] = v
    return out


def provenance(*, git: bool = True, git_timeout_s: float = GIT_TIMEOUT_S) -> dict[str, Any]:
    """The run's provenance record (see the module docstring); never raises."""
    out: dict[str, Any] = {}
    try:
        out["command"] = shlex.join(sys.argv) if sys.argv else None
        out["argv"] = list(sys.argv)
        out["executable"] = sys.executable
        out["cwd"] = os.getcwd()
    except Exception:  # a deleted working directory
        pass
    try:
        out["host"] = socket.gethostname()
    except Exception:
        pass
    user = _user()
    if user:
        out["user"] = user
    out["python"] = platform.python_version()
    out["pid"] = os.getpid()
    fw = framework_in_use()
    out["frameworks"] = imported_frameworks()
    out["framework"] = fw
    out["versions"] = package_versions()
    if git:
        g = git_state(timeout_s=git_timeout_s)
        if g:
            out["git"] = g
    return out


def detected_region(timeout_s: float = 1.0) -> str | None:
    """The region of the Google Cloud VM this runs on (from its zone), else None; asks the
    metadata server only on a machine that says it is on Google Cloud."""
    if not on_google_cloud():
        return None
    try:
        from mlgoodput._gcp_metadata import metadata_value

        zone = metadata_value("instance/zone", timeout_s=timeout_s)
    except Exception:
        return None
    if not zone:
        return None
    name = zone.rsplit("/", 1)[-1]  # projects/123/zones/us-central1-a
    return name.rsplit("-", 1)[0] if name.count("-") >= 2 else name


def where(region: str | None, environment: str | None) -> tuple[str | None, str | None]:
    """(region, environment) as facts about the run: a value the user gave, or a detected
    region; the SDK's signature defaults (`us-central1`, `prod`) are left out off the cloud."""
    on_cloud = on_google_cloud()
    if region is None or region == SDK_REGION_DEFAULT:
        region = detected_region() if on_cloud else None
    if environment == SDK_ENVIRONMENT_DEFAULT and not on_cloud:
        environment = None
    return region, environment
