"""`mlgoodput.jax.track_step_flops`: each compile of the step records the compiler's FLOPs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

jax = pytest.importorskip("jax", reason="JAX is an optional extra: pip install 'mlgoodput[jax]'")
import jax.numpy as jnp  # noqa: E402

import mlgoodput.jax as jm  # noqa: E402
from mlgoodput import flops  # noqa: E402
from mlgoodput.accounting import GoodputCalculator  # noqa: E402
from mlgoodput.events import Kind  # noqa: E402
from mlgoodput.goodput import GoodputRecorder  # noqa: E402
from mlgoodput.store import open_store  # noqa: E402


@pytest.fixture(autouse=True)
def _no_session() -> Iterator[None]:
    jm.shutdown()
    yield
    jm.shutdown()


def _make_step() -> Any:
    @partial(jax.jit, donate_argnums=0)
    def train_step(w: Any, x: Any) -> Any:
        return w - 0.01 * jnp.tanh(x @ w).mean() * w

    return train_step


@pytest.mark.parametrize("via", ["recorder", "session"])
def test_each_compile_records_step_flops(tmp_path: Path, via: str) -> None:
    store = f"sqlite://{tmp_path}/g.db"
    rec = GoodputRecorder("tf", "logs", logging_enabled=True, store=store)
    _train_step = _make_step()  # a fresh function: its compilation cache starts empty
    if via == "session":
        jm.init(job_name="tf", recorder=rec, exporters=[], store=store)
        step = jm.track_step_flops(_train_step)
    else:
        step = jm.track_step_flops(_train_step, recorder=rec)
    w = jnp.ones((64, 64))
    want = {rows: flops.jax_step_flops(_train_step, w, jnp.ones((rows, 64))) for rows in (8, 32, 128)}
    rec.record_job_start_time()
    rows_by_step = [8] * 4 + [32] * 3 + [8] * 2 + [128]
    starts: dict[int, float] = {}
    ends: dict[int, float] = {}
    for i, rows in enumerate(rows_by_step):
        rec.record_step_start_time(i)
        x = jnp.ones((rows, 64))
        starts[i] = time.time()
        w = step(w, x)  # w is donated: the wrapper must not need it again
        ends[i] = time.time()
    w.block_until_ready()
    rec.record_job_end_time()
    jm.shutdown()
    assert rec.close(10)
    events = list(open_store(store).read("logs", "tf").columns.events())
    got = [e.value for e in events if e.kind == Kind.STEP_FLOPS]
    # a record per new compile (8, 32, 128 rows), none when an old shape comes back
    assert got == [want[8], want[32], want[128]]
    # each count holds from the start of the call that compiled it, not from after it
    # (the spec takes the FLOPs in effect at a step's start)
    when = [e.time for e in events if e.kind == Kind.STEP_FLOPS]
    for t, i in zip(when, (0, 4, 9), strict=True):
        assert starts[i] <= t < starts[i] + (ends[i] - starts[i]) / 2  # before the compile, not after
    assert want[32] is not None and want[8] is not None and want[32] > want[8]
    p = GoodputCalculator("tf", "logs", store=open_store(store)).report().productivity
    assert p is not None and p.flops_per_step == want[128]


def test_refuses_a_plain_function_and_never_raises_without_a_recorder(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(TypeError, match=r"jax\.jit"):
        jm.track_step_flops(lambda x: x)
    step = jm.track_step_flops(jax.jit(lambda x: x * 2))  # no recorder, no session
    assert float(step(jnp.float32(2.0))) == 4.0
    assert float(step(jnp.ones(3)).sum()) == 6.0
    assert sum("could not record" in m for m in caplog.messages) == 1
