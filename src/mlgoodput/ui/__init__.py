"""`mlgoodput ui`: a web app over a store (jobs, a job's timeline, runs, console, compare)
and the JSON API its pages read. Standard library only; the charts (uPlot) are built from
npm into `static/vendor` by `make ui-assets`."""

from mlgoodput.ui._api import Api, ApiError
from mlgoodput.ui._profiles import MAX_PROFILE_BYTES, ProfileFiles
from mlgoodput.ui._server import BUILD_HINT, UIServer, assets_missing, serve

__all__ = ["BUILD_HINT", "MAX_PROFILE_BYTES", "Api", "ApiError", "ProfileFiles", "UIServer", "assets_missing", "serve"]
