"""`ml_goodput_measurement.src.monitoring`'s twin: this name is `mlgoodput.monitoring` itself."""

import sys

from mlgoodput import monitoring as _module

sys.modules[__name__] = _module
