"""`ml_goodput_measurement.src.goodput_elastic`'s twin: this name is `mlgoodput.goodput_elastic` itself."""

import sys

from mlgoodput import goodput_elastic as _module

sys.modules[__name__] = _module
