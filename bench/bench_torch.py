"""What mlgoodput.torch adds to a PyTorch training loop's step (CPU, SQLite store).

Prints a table of per-step cost in microseconds (median, p99) of:
  - a bare loop over ready batches (the floor: a Python for loop);
  - `TorchRecorder.steps()`: data-loading start/end and step start/end journaled per step;
  - the Lightning callback's per-batch hooks (on_train_batch_start/end), called directly;
  - the HF callback's per-step hooks (on_step_begin/end), called directly;
and the one-time cost of counting one step's FLOPs with FlopCounterMode on a small MLP.
Usage: python bench/bench_torch.py [--steps N]
"""

from __future__ import annotations

import argparse
import gc
import itertools
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def per_step(times: list[int]) -> tuple[float, float]:
    d = sorted(b - a for a, b in itertools.pairwise(times))
    return d[len(d) // 2] / 1e3, d[min(len(d) - 1, int(0.99 * len(d)))] / 1e3


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20000)
    n = ap.parse_args().steps
    import torch

    import mlgoodput.torch as mt
    from mlgoodput import flops
    from mlgoodput.torch.hf import GoodputCallback as HFCallback
    from mlgoodput.torch.lightning import GoodputCallback as LitCallback

    rows = []
    batches = [0] * n
    pc = time.perf_counter_ns
    with tempfile.TemporaryDirectory() as d:
        store = f"sqlite://{d}/b.db"
        gc.disable()
        t = []
        for _ in batches:
            t.append(pc())
        rows.append(("bare loop", *per_step(t)))

        gp = mt.TorchRecorder(job_name="bench", store=store, measure_flops=False)
        t = []
        with gp.job():
            for _ in gp.steps(batches):
                t.append(pc())
        rows.append(("TorchRecorder.steps()", *per_step(t)))
        gp.close()

        lit = LitCallback(job_name="lit", store=store, measure_flops=False)
        trainer = SimpleNamespace(
            global_rank=0, world_size=1, global_step=0, strategy=SimpleNamespace(checkpoint_io=None)
        )
        lit._timeline.begin(0, 1)
        t = []
        for i in range(n):
            t.append(pc())
            trainer.global_step = i
            lit.on_train_batch_start(trainer, None, None, i)
            lit.on_train_batch_end(trainer, None, None, None, i)
        rows.append(("Lightning callback hooks", *per_step(t)))
        lit._timeline.end()

        hf = HFCallback(job_name="hf", store=store, measure_flops=False)
        args = SimpleNamespace(process_index=0, world_size=1)
        state = SimpleNamespace(global_step=0)
        hf.on_train_begin(args, state, None)
        t = []
        for i in range(n):
            t.append(pc())
            state.global_step = i
            hf.on_step_begin(args, state, None)
            hf.on_step_end(args, state, None)
        rows.append(("HF callback hooks", *per_step(t)))
        hf.on_train_end(args, state, None)
        gc.enable()

    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512))
    x = torch.randn(64, 512)
    model(x).sum().backward()  # warm up

    def best(fn: object) -> float:
        out = []
        for _ in range(5):
            t0 = pc()
            fn()  # type: ignore[operator]
            out.append((pc() - t0) / 1e3)
        return min(out)

    plain = best(lambda: model(x).sum().backward())
    counted = best(lambda: flops.torch_step_flops(lambda: model(x).sum().backward()))

    print(f"{'per step (' + str(n) + ' steps)':<32} {'median us':>10} {'p99 us':>10}")
    for name, med, p99 in rows:
        print(f"{name:<32} {med:>10.2f} {p99:>10.2f}")
    print(f"\n{'one step of a 2x512 MLP, batch 64':<40} {'best of 5, us':>14}")
    print(f"{'plain':<40} {plain:>14.0f}")
    print(f"{'under FlopCounterMode (once per run)':<40} {counted:>14.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
