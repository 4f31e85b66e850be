"""ElasticGoodputMonitor: GoodputMonitor that can also upload slice efficiency."""

from __future__ import annotations

from typing import Any

from mlgoodput._monitoring._monitor import GoodputMonitor


class ElasticGoodputMonitor(GoodputMonitor):
    """A GoodputMonitor for elastic jobs: `include_slice_efficiency=True` adds the stepping and
    available slice efficiency (`elastic/*_slice_efficiency_pct`) to the cumulative upload."""

    _elastic = True

    def __init__(self, *args: Any, include_slice_efficiency: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, include_slice_efficiency=include_slice_efficiency, **kwargs)
