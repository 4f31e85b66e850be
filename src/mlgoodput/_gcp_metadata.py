"""The GCE metadata server: one value at a time, cached, asked once when unreachable.

Shared by the Cloud Monitoring exporter and the JAX integration (resource labels).
"""

from __future__ import annotations

import logging
import os
import threading
import urllib.error
import urllib.request

from mlgoodput import _env

__all__ = ["metadata_base_url", "metadata_value"]

log = logging.getLogger("mlgoodput")

_metadata_cache: dict[tuple[str, str], str | None] = {}
_metadata_down: set[str] = set()
_metadata_lock = threading.Lock()


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
