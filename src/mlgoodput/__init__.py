"""mlgoodput: where the accelerator time of ML training jobs goes.

The public modules are `mlgoodput.goodput` (recorder and calculator),
`mlgoodput.goodput_elastic`, `mlgoodput.monitoring`, `mlgoodput.monitoring_elastic`,
`mlgoodput.export`, `mlgoodput.jax`, `mlgoodput.diagnostics` and `mlgoodput.console`.
Importing this package imports none of them.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
