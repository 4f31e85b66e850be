"""A real JAX training job on the CPU, instrumented the way we tell users to.

Runs as `python -m mlgoodput._demo.workload_jax --store URL --job JOB --ckpt-dir DIR`
(the workload protocol of `supervisor.py`: one JSON object per line on stdout).

The model is a small MLP classifier trained with Adam on synthetic data (a fixed random
"teacher" labels Gaussian inputs, so the loss really falls). Around it:

- a `GoodputRecorder` around every phase: job, accelerator init, training preparation, the
  first batch, every step and its overlapped prefetch, an evaluation as custom badput;
- `mlgoodput.jax.init(recorder=...)`: every compile is measured, so the first step's and a
  later recompilation (the batch grows at three quarters of the run) are program startup;
- Orbax checkpoints (async saves) through `mlgoodput.jax.OrbaxLogger`, restored on restart;
- a `GoodputMonitor` writing TensorBoard files, and the JAX metrics to TensorBoard too;
- the loss as an ML run and the log lines through the demo's console, under the job's name.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from mlgoodput._demo._track import Tracking
from mlgoodput.goodput import GoodputRecorder

IN, HIDDEN, CLASSES = 256, 1024, 10


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--job", required=True)
    ap.add_argument("--logger", default=None, help="logger_name (default goodput_JOB)")
    ap.add_argument("--ckpt-dir", required=True, type=Path)
    ap.add_argument(
        "--tensorboard-dir", type=Path, default=None, help="default: 'tensorboard' beside the checkpoint directory"
    )
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=512)
    ap.add_argument("--ckpt-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="multiply the simulated parts (device bring-up, input pipeline latency)",
    )
    a = ap.parse_args(argv)
    k = a.time_scale
    logger_name = a.logger or f"goodput_{a.job}"
    tb_dir = a.tensorboard_dir or a.ckpt_dir.resolve().parent / "tensorboard"

    # -- job start: before anything slow, so all of it is accounted -------------------
    rec = GoodputRecorder(a.job, logger_name, True, store=a.store)
    rec.record_job_start_time()
    rec.record_job_submit_time()  # what the scheduler (here: the demo supervisor) left in the environment
    say(phase="start", pid=os.getpid(), steps=a.steps, tensorboard_dir=str(tb_dir))

    # -- accelerator initialization ------------------------------------------------------
    say(phase="init")
    rec.record_tpu_init_start_time()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax
    import orbax.checkpoint as ocp

    import mlgoodput.jax as jm
    from mlgoodput.export import TensorBoardExporter
    from mlgoodput.monitoring import GoodputMonitor

    devices = jax.devices()
    time.sleep(0.5 * k)  # a real accelerator takes longer to come up
    rec.record_tpu_init_end_time()

    # JAX compile metrics (to TensorBoard) and measured compile time (to the recorder)
    jm.init(
        job_name=a.job,
        recorder=rec,
        store=a.store,
        exporters=[TensorBoardExporter(tb_dir / "jax")],
        interval_s=5,
        histograms=False,
    )
    monitor = GoodputMonitor(
        a.job,
        logger_name,
        tensorboard_dir=str(tb_dir),
        upload_interval=5,
        monitoring_enabled=True,
        include_badput_breakdown=True,
        store=a.store,
    )
    monitor.start_goodput_uploader()

    # -- training preparation: model, optimizer, checkpoint manager, restore -------------
    say(phase="prep", devices=len(devices))
    rec.record_training_preparation_start_time()
    model = {"layers": 3, "in": IN, "hidden": HIDDEN, "classes": CLASSES}
    track = Tracking(a.job, a.store, {"model": model, "optimizer": "adam", "lr": 1e-3, "batch": a.batch}, "JAX")
    key = jax.random.PRNGKey(0)
    k1, k2, k3 = jax.random.split(key, 3)
    params = {
        "w1": jax.random.normal(k1, (IN, HIDDEN)) * (1 / IN) ** 0.5,
        "b1": jnp.zeros(HIDDEN),
        "w2": jax.random.normal(k2, (HIDDEN, HIDDEN)) * (1 / HIDDEN) ** 0.5,
        "b2": jnp.zeros(HIDDEN),
        "w3": jax.random.normal(k3, (HIDDEN, CLASSES)) * (1 / HIDDEN) ** 0.5,
        "b3": jnp.zeros(CLASSES),
    }
    opt = optax.adam(1e-3)
    state = {"params": params, "opt_state": opt.init(params)}
    teacher = np.random.default_rng(1234).normal(size=(IN, CLASSES)).astype(np.float32)

    def batch(step: int, size: int) -> tuple[Any, Any]:
        rng = np.random.default_rng(step)  # the same batch for the same step, after a restart
        x = rng.normal(size=(size, IN)).astype(np.float32)
        return x, np.argmax(x @ teacher, axis=1)

    def loss_fn(p: Any, x: Any, y: Any) -> Any:
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        h = jax.nn.relu(h @ p["w2"] + p["b2"])
        logits = h @ p["w3"] + p["b3"]
        return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()

    @jax.jit
    def train_step(s: Any, x: Any, y: Any) -> tuple[Any, Any]:
        loss, grads = jax.value_and_grad(loss_fn)(s["params"], x, y)
        updates, opt_state = opt.update(grads, s["opt_state"], s["params"])
        return {"params": optax.apply_updates(s["params"], updates), "opt_state": opt_state}, loss

    @jax.jit
    def accuracy(p: Any, x: Any, y: Any) -> Any:
        h = jax.nn.relu(x @ p["w1"] + p["b1"])
        h = jax.nn.relu(h @ p["w2"] + p["b2"])
        return ((h @ p["w3"] + p["b3"]).argmax(-1) == y).mean()

    manager = ocp.CheckpointManager(
        a.ckpt_dir.resolve(),
        options=ocp.CheckpointManagerOptions(max_to_keep=2, enable_async_checkpointing=True),
        logger=jm.OrbaxLogger(rec),  # every save (blocking part) and restore is recorded
    )
    start = 0
    restored = manager.latest_step()
    if restored is not None:
        say(phase="restore", step=restored)
        state = manager.restore(restored, args=ocp.args.StandardRestore(state))
        start = restored + 1
    grow_at = (3 * a.steps) // 4  # the batch grows here: JAX compiles train_step again

    def size_at(step: int) -> int:
        return int(a.batch * 2 if step >= grow_at else a.batch)

    # FLOPs of one step from the compiler, recorded whenever train_step compiles (the first
    # step, the larger batch). Compiling it here instead (`flops.jax_step_flops`) would move
    # that compile time into training preparation and leave the steps nothing to compile.
    # The CPU's peak comes from configuration.
    from mlgoodput import flops

    tracked_step = jm.track_step_flops(train_step, recorder=rec)
    flops.record_peak(rec, "fp32")
    rec.record_training_preparation_end_time()

    # -- the first batch: nothing to overlap it with yet ----------------------------------
    rec.record_data_loading_start_time()
    x, y = batch(start, size_at(start))
    time.sleep(0.3 * k)  # open files, fill the input pipeline
    rec.record_data_loading_end_time()

    # -- training -------------------------------------------------------------------------
    for step in range(start, a.steps):
        rec.record_step_start_time(step)
        state, loss = tracked_step(state, x, y)  # dispatched: runs while we prefetch
        rec.record_data_loading_start_time()
        x, y = batch(step + 1, size_at(step + 1))
        time.sleep(0.35 * k)  # the input pipeline's latency (reading, decoding), overlapped
        rec.record_data_loading_end_time()
        loss = float(loss)  # waits for the device
        say(phase="step", step=step, steps=a.steps, loss=round(loss, 4))
        track.step(step, loss)
        if step == grow_at and step != start:
            say(phase=f"recompiled train_step for batch {size_at(step)}", step=step)
        if a.eval_every and (step + 1) % a.eval_every == 0:
            rec.record_custom_badput_event_start_time(custom_badput_event_type="eval_step")
            ex, ey = batch(10**6, 1024)
            acc = float(accuracy(state["params"], ex, ey))
            rec.record_custom_badput_event_end_time(custom_badput_event_type="eval_step")
            say(phase="eval", step=step, accuracy=round(acc, 3))
        if a.ckpt_every and (step + 1) % a.ckpt_every == 0:
            manager.save(step, args=ocp.args.StandardSave(state))  # async: returns after the blocking part
            say(phase="checkpoint", step=step)

    # -- the end ----------------------------------------------------------------------------
    manager.wait_until_finished()
    manager.close()
    rec.record_job_end_time()
    jm.shutdown()
    monitor.stop_goodput_uploader()
    rec.close()
    track.close()
    say(phase="done", steps=a.steps, tensorboard_dir=str(tb_dir))
    return 0


if __name__ == "__main__":
    sys.exit(main())
