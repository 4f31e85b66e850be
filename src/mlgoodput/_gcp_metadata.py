"""The GCE metadata server: one value at a time, cached, asked once when unreachable; and
the one answer to "are we on Google Cloud" (`on_google_cloud`), asked before the server is.

Shared by the Cloud Monitoring exporter, the JAX integration (resource labels), the run's
provenance (its region) and the monitor (how loudly it says it sends nothing).
"""

from __future__ import annotations

import logging
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Callable

from mlgoodput import _env

__all__ = ["metadata_base_url", "metadata_value", "on_google_cloud"]

log = logging.getLogger("mlgoodput")

_metadata_cache: dict[tuple[str, str], str | None] = {}
_metadata_down: set[str] = set()
_metadata_lock = threading.Lock()


_DMI_FILES = ("/sys/class/dmi/id/product_name", "/sys/class/dmi/id/bios_vendor")


def on_google_cloud(read: Callable[[str], str] | None = None) -> bool:
    """True where the environment points at a metadata server or a Cloud TPU
    (`$GCE_METADATA_HOST`, `$TPU_WORKER_ID`, `$TPU_NAME`), or the machine's DMI tables name
    Google as its maker (a Compute Engine VM). Reads two small files; never the network.
    `read` reads a file (for tests)."""
    if any(os.environ.get(v) for v in (_env.GCE_METADATA_HOST, _env.TPU_WORKER_ID, _env.TPU_NAME)):
        return True
    for path in _DMI_FILES:
        try:
            if read is not None:
                text = read(path)
            else:
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
        except OSError:
            continue
        if "Google" in text:
            return True
    return False


def metadata_base_url(host: str | None = None) -> str:
    host = host or os.environ.get(_env.GCE_METADATA_HOST) or "metadata.google.internal"
    return host if "://" in host else "http://" + host


def metadata_value(path: str, *, host: str | None = None, timeout_s: float = 1.0) -> str | None:
    """One value from the GCE metadata server, or None. An unreachable server is asked once
    per process (a short timeout, no retries), so off GCP this costs at most `timeout_s`."""
    base = metadata_base_url(host)
    with _metadata_lock:
        if base in _metadata_down:
            return None
        if (base, path) in _metadata_cache:
            return _metadata_cache[(base, path)]
    url = f"{base}/computeMetadata/v1/{path}"
    req = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    value: str | None
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            value = resp.read().decode().strip() or None
    except urllib.error.HTTPError:
        value = None  # the server answered: this value is just not there
    except (OSError, ValueError) as e:
        with _metadata_lock:
            _metadata_down.add(base)
        log.info("GCE metadata server %s unreachable (%s); not on GCE?", base, e)
        return None
    with _metadata_lock:
        _metadata_cache[(base, path)] = value
    return value
