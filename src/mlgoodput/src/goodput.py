"""`ml_goodput_measurement.src.goodput`'s twin: this name is `mlgoodput.goodput` itself."""

import sys

from mlgoodput import goodput as _module

sys.modules[__name__] = _module
