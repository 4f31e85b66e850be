"""`ml_goodput_measurement.src.goodput_utils`'s twin: this name is `mlgoodput.goodput_utils` itself."""

import sys

from mlgoodput import goodput_utils as _module

sys.modules[__name__] = _module
