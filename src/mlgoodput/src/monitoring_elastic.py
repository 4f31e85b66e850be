"""`ml_goodput_measurement.src.monitoring_elastic`'s twin: this name is `mlgoodput.monitoring_elastic` itself."""

import sys

from mlgoodput import monitoring_elastic as _module

sys.modules[__name__] = _module
