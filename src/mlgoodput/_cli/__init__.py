"""The CLI's commands, one module each; `mlgoodput.cli` parses and dispatches."""

from mlgoodput._cli._common import CLIError

__all__ = ["CLIError"]
