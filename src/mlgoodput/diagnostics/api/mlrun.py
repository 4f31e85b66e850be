"""The SDK's `api.mlrun` path: `machinelearning_run` and its gs:// path normalization."""

from mlgoodput.diagnostics._run import _normalize_path, machinelearning_run


def normalize_gcs_path(gcs_path: str | None) -> str | None:
    """`gcs_path` with repeated slashes collapsed and no trailing slash (the scheme is kept)."""
    if not gcs_path:
        return gcs_path
    if "://" not in gcs_path:
        import re

        return re.sub("/+", "/", gcs_path).rstrip("/")
    out: str = _normalize_path(gcs_path)
    return out


__all__ = ["machinelearning_run", "normalize_gcs_path"]
