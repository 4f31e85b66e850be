"""Calls into the recorder from a training loop that never raise: misuse warns once."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from mlgoodput._misuse import MlGoodputMisuseError
from mlgoodput._once import Once

log = logging.getLogger("mlgoodput.torch")


class Safe:
    """Runs recorder calls for an integration; a failure is logged once per call site and
    counted, never raised into training (the promise "never throw into training")."""

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.errors = 0
        self._warned = Once()

    def __call__(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except MlGoodputMisuseError:
            raise  # strict mode asked for misuse to raise (users' own tests)
        except Exception as e:
            self.errors += 1
            self._warned.warning(log, what, "%s: %s failed (recorded what it could): %s", self.owner, what, e)
            return None

    def warn_once(self, what: str, message: str) -> None:
        """Log `message` the first time `what` comes (shared with the failures' keys)."""
        self._warned.warning(log, what, "%s: %s", self.owner, message)
