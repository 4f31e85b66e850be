"""`mlgoodput.jax.track_step_flops`: each compile of the step records the compiler's FLOPs."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

jax = pytest.importorskip("jax", reason="JAX is an optional extra: pip install 'mlgoodput[jax]'")
import jax.numpy as jnp  # noqa: E402

import mlgoodput.jax as jm  # noqa: E402
from mlgoodput import flops  # noqa: E402
from mlgoodput.accounting import BadputType as B  # noqa: E402
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


@pytest.mark.slow
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
    for i, rows in enumerate(rows_by_step):
        rec.record_step_start_time(i)
        x = jnp.ones((rows, 64))
        w = step(w, x)  # w is donated: the wrapper must not need it again
    w.block_until_ready()
    rec.record_job_end_time()
    jm.shutdown()
    assert rec.close(10)
    events = list(open_store(store).read("logs", "tf").columns.events())
    got = [e.value for e in events if e.kind == Kind.STEP_FLOPS]
    # a record whenever the shape a call runs changes: a new compile (8, 32, 128 rows) or
    # a shape compiled earlier coming back from jit's cache (8 rows at step 7)
    assert got == [want[8], want[32], want[8], want[128]]
    # each count is dated after the previous step's start and at or before its own step's
    # (the spec takes the FLOPs in effect at a step's start), the first before step 0
    when = [e.time for e in events if e.kind == Kind.STEP_FLOPS]
    starts = {e.step: e.time for e in events if e.kind == Kind.STEP_START}
    assert when[0] <= starts[0]
    for t, i in zip(when[1:], (4, 7, 9), strict=True):
        assert starts[i - 1] < t <= starts[i]
    assert want[32] is not None and want[8] is not None and want[32] > want[8]
    p = GoodputCalculator("tf", "logs", store=open_store(store)).report().productivity
    assert p is not None and p.flops_per_step == want[128]
    assert p.achieved_flops_per_s is not None


def test_refuses_a_plain_function_and_never_raises_without_a_recorder(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(TypeError, match=r"jax\.jit"):
        jm.track_step_flops(lambda x: x)
    step = jm.track_step_flops(jax.jit(lambda x: x * 2))  # no recorder, no session
    assert float(step(jnp.float32(2.0))) == 4.0
    assert float(step(jnp.ones(3)).sum()) == 6.0
    assert sum("could not record" in m for m in caplog.messages) == 1


MLP = [32, 256, 256, 16]  # widths of a small MLP with biases and ReLU
BATCH, FULL, PARTIAL = 64, 5, 16  # each epoch: 5 full batches of 64, then one of 16


def _mlp_step() -> tuple[Any, Any]:
    def loss(ps: Any, x: Any, y: Any) -> Any:
        h = x
        for i, (w, b) in enumerate(ps):
            h = h @ w + b
            if i < len(ps) - 1:
                h = jax.nn.relu(h)
        return jnp.mean((h - y) ** 2)

    @partial(jax.jit, donate_argnums=0)
    def train_step(ps: Any, x: Any, y: Any) -> Any:
        grads = jax.grad(loss)(ps, x, y)
        return jax.tree_util.tree_map(lambda p, g: p - 0.01 * g, ps, grads)

    key = jax.random.PRNGKey(0)
    ps = []
    for a, b in itertools.pairwise(MLP):
        key, k = jax.random.split(key)
        ps.append((jax.random.normal(k, (a, b)) * 0.05, jnp.zeros(b)))
    return train_step, ps


@pytest.mark.slow
def test_a_partial_last_batch_counts_its_own_flops_and_full_batches_theirs(tmp_path: Path) -> None:
    # the compiler's count per shape, times the steps of that shape, is what the report
    # must attribute: a small last batch must not make the next epoch's full steps small
    store = f"sqlite://{tmp_path}/g.db"
    rec = GoodputRecorder("pb", "logs", logging_enabled=True, store=store)
    train_step, ps = _mlp_step()
    step = jm.track_step_flops(train_step, recorder=rec)
    data_x = jax.random.normal(jax.random.PRNGKey(1), (BATCH * FULL + PARTIAL, MLP[0]))
    data_y = jnp.ones((BATCH * FULL + PARTIAL, MLP[-1]))
    sizes = [BATCH] * FULL + [PARTIAL]
    per_shape = {n: flops.jax_step_flops(train_step, ps, data_x[:n], data_y[:n]) for n in set(sizes)}
    assert per_shape[BATCH] and per_shape[PARTIAL] and per_shape[BATCH] > 3 * per_shape[PARTIAL]
    rec.record_peak_flops(1e11)
    rec.record_job_start_time()
    i = 0
    for _epoch in range(2):
        at = 0
        for n in sizes:
            rec.record_step_start_time(i)
            ps = step(ps, data_x[at : at + n], data_y[at : at + n])
            jax.block_until_ready(ps)
            at += n
            i += 1
    rec.record_job_end_time()
    assert rec.close(10)
    expected = sum(per_shape[n] for n in sizes * 2)  # type: ignore[misc]
    events = list(open_store(store).read("logs", "pb").columns.events())
    fl = [(e.time, e.value) for e in events if e.kind == Kind.STEP_FLOPS]
    # a record each time the executed shape changes: full, partial, full again, partial
    assert [v for _, v in fl] == [per_shape[BATCH], per_shape[PARTIAL]] * 2
    # each dated after the previous step's start and at or before its own step's start
    starts = {e.step: e.time for e in events if e.kind == Kind.STEP_START}
    for (t, _), k in zip(fl[1:], (FULL, FULL + 1, 2 * FULL + 1), strict=True):
        assert starts[k - 1] < t <= starts[k]
    r = GoodputCalculator("pb", "logs", store=open_store(store)).report()
    p = r.productivity
    assert p is not None and p.steps_executed == 2 * len(sizes) and p.achieved_flops_per_s is not None
    attributed = p.achieved_flops_per_s * r.productive_s  # FLOPs of the useful (here: all) steps
    err = attributed / expected - 1
    print(f"attributed {attributed:.6g} FLOPs, compiler per shape x steps {expected:.6g}: {100 * err:+.2f} %")
    assert abs(err) < 1e-4  # exact but for rounding: each step has its own shape's count
    # MFU: the same FLOPs over the peak times the time in steps (docs/accounting.md)
    steps_s = r.productive_s + sum(
        r.badput_total_s(b) for b in (B.PROGRAM_STARTUP, B.STALL, B.WASTED_PROGRESS_FROM_DISRUPTION)
    )
    assert p.peak_flops_per_s == 1e11 and p.mfu == pytest.approx(expected / (1e11 * steps_s), rel=1e-4)


class _Records:
    """A recorder that keeps the step FLOPs it is given."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def record_step_flops(self, flops: float, *, effective_time: float | None = None) -> None:
        self.values.append(flops)


def _changes(values: list[Any]) -> list[Any]:
    return [v for i, v in enumerate(values) if i == 0 or v != values[i - 1]]


def test_cache_hits_reselect_the_count_by_shape_and_static_argument() -> None:
    @partial(jax.jit, static_argnames="layers")
    def f(w: Any, x: Any, *, layers: int) -> Any:
        for _ in range(layers):
            x = jnp.tanh(x @ w)
        return x.sum()

    w = jnp.ones((16, 16))
    calls = [(8, 1), (8, 1), (32, 1), (8, 1), (8, 2), (8, 1), (32, 1), (32, 2), (8, 2)]
    count = {c: flops.jax_step_flops(f, w, jnp.ones((c[0], 16)), layers=c[1]) for c in set(calls)}
    assert len(set(count.values())) == 4
    rec = _Records()
    step = jm.track_step_flops(f, recorder=rec)
    for rows, layers in calls:
        step(w, jnp.ones((rows, 16)), layers=layers)
    assert rec.values == _changes([count[c] for c in calls])


def test_a_recompile_that_keeps_the_count_records_nothing_more() -> None:
    f = jax.jit(lambda w, x, s: (x @ w).sum() * s)
    w, x = jnp.ones((16, 16)), jnp.ones((8, 16))
    rec = _Records()
    step = jm.track_step_flops(f, recorder=rec)
    for s in (2.0, jnp.float32(2.0), 2.0, jnp.float32(3.0)):  # a Python float is weakly typed: two executables
        step(w, x, s)
    assert f._cache_size() == 2
    assert rec.values == [flops.jax_step_flops(f, w, x, 2.0)]


def test_an_executable_compiled_around_the_wrapper_is_recognised_on_a_cache_hit() -> None:
    f = jax.jit(lambda w, x: jnp.tanh(x @ w).sum())
    w = jnp.ones((16, 16))
    small, full = jnp.ones((4, 16)), jnp.ones((64, 16))
    f(w, small)  # compiled before the wrap: the wrapper never sees it compile
    rec = _Records()
    step = jm.track_step_flops(f, recorder=rec)
    for x in (full, full, small, full, small):
        step(w, x)
    assert f._cache_size() == 2
    want = {x.shape: flops.jax_step_flops(f, w, x) for x in (small, full)}
    assert rec.values == [want[(64, 16)], want[(4, 16)], want[(64, 16)], want[(4, 16)]]
