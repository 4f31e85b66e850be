"""The SDK's `api.mlrun` path: `machinelearning_run` and its gs:// path normalization."""

import logging

from mlgoodput.diagnostics._run import normalize_path
from mlgoodput.diagnostics._start import machinelearning_run
from mlgoodput.diagnostics.custom_types import exceptions, mlrun_types

logger = logging.getLogger("mlgoodput.diagnostics")


def normalize_gcs_path(gcs_path: str | None) -> str | None:
    """`gcs_path` with repeated slashes collapsed and no trailing slash (the scheme is kept)."""
    if not gcs_path:
        return gcs_path
    if "://" not in gcs_path:
        import re

        return re.sub("/+", "/", gcs_path).rstrip("/")
    out: str = normalize_path(gcs_path)
    return out


__all__ = ["exceptions", "logger", "machinelearning_run", "mlrun_types", "normalize_gcs_path"]
