"""`CompletionWatcher` for JAX: steps timed by when their device work finished."""

from __future__ import annotations

from typing import TYPE_CHECKING

from mlgoodput._completion import CompletionWatcher as _Watcher

if TYPE_CHECKING:
    from mlgoodput._recorder import GoodputRecorder


class CompletionWatcher(_Watcher):
    """Times the recorder's steps by device completion (docs/jax.md, "Asynchronous dispatch"):

        watcher = CompletionWatcher(recorder)
        for step in ...:
            recorder.record_step_start_time(step)
            state, metrics = train_step(state, batch)
            watcher.watch(step, metrics)    # done when `metrics` is ready

    A worker thread calls `jax.block_until_ready` on each watched output.
    """

    def __init__(self, recorder: GoodputRecorder) -> None:
        import jax

        super().__init__(recorder, jax.block_until_ready, name="jax")
