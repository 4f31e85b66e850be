"""jax-monitoring's `gcp_utils` module: a Cloud Monitoring client for the configured project.

mlgoodput's exporter process makes its own client, so `init` does not call
`initialize_client`; it is here for code that does. It never raises: without the
`mlgoodput[gcp]` extra, credentials or a project, it logs why and leaves the client None.
"""

from __future__ import annotations

import logging
from typing import Any

from mlgoodput.jax.config import get_config

__all__ = ["get_client", "get_project_path", "initialize_client", "logger"]

log = logger = logging.getLogger("mlgoodput.jax")

_CLIENT: Any = None
_PROJECT_PATH: str | None = None


def initialize_client() -> None:
    """Create the client with Application Default Credentials; fill in the project when unset."""
    global _CLIENT, _PROJECT_PATH
    config = get_config()
    try:
        import google.auth
        from google.auth.exceptions import DefaultCredentialsError
        from google.cloud import monitoring_v3
    except ImportError as e:
        log.error("mlgoodput.jax: a Cloud Monitoring client needs pip install 'mlgoodput[gcp]' (%s)", e)
        return
    try:
        credentials, project_id = google.auth.default()
        if config.project_id is None:
            if project_id:
                config.project_id = project_id
            else:
                log.warning(
                    "mlgoodput.jax: no project id in the credentials and none configured;"
                    " metrics cannot be exported to Cloud Monitoring"
                )
        _CLIENT = monitoring_v3.MetricServiceClient(credentials=credentials)
        if config.project_id:
            _PROJECT_PATH = _CLIENT.common_project_path(config.project_id)
    except DefaultCredentialsError:
        log.error("mlgoodput.jax: no Application Default Credentials; no Cloud Monitoring client")
    except Exception as e:
        log.error("mlgoodput.jax: could not create the Cloud Monitoring client: %s", e)


def get_client() -> Any:
    """The client made by `initialize_client`, or None."""
    return _CLIENT


def get_project_path() -> str | None:
    """`projects/<project id>` once `initialize_client` found a project, else None."""
    return _PROJECT_PATH
