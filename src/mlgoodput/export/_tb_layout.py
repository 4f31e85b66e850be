"""What makes TensorBoard read well: fewer JAX tags, a chart layout, steps that never go back.

- JAX series are summed over their per-function labels (count and sum per event and host,
  and the maximum for compile phases) for TensorBoard only; Prometheus and the other
  backends keep every label and statistic.
- A custom-scalars layout puts goodput first, the badput buckets in one chart each for
  share and seconds, and the JAX tags in a handful of charts.
- TensorBoard drops points when a tag's step goes back (it takes that for a crash), so a
  writer continues from the largest step the folder already holds for each tag.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from typing import Any

from mlgoodput.export._base import Sample
from mlgoodput.export._names import IDENTITY_LABELS

#: Labels a condensed JAX series keeps (the rest, such as fun_name, are summed over).
JAX_KEEP_LABELS = frozenset({"host"}) | IDENTITY_LABELS
_JAX_DROP = ("/min", "/last", "/bucket")
_JAX_MAX_KEPT = "jax/core/compile/"  # the slowest compile matters; other maxima add tags, not insight


def condense_jax(samples: Sequence[Sample]) -> list[Sample]:
    """JAX samples summed over their per-function labels; other samples unchanged."""
    out: list[Sample] = []
    merged: dict[tuple[str, tuple[tuple[str, str], ...]], Sample] = {}
    for s in samples:
        if not s.name.startswith("jax/"):
            out.append(s)
            continue
        if s.name.endswith(_JAX_DROP) or (s.name.endswith("/max") and not s.name.startswith(_JAX_MAX_KEPT)):
            continue
        labels = {k: v for k, v in s.labels.items() if k in JAX_KEEP_LABELS}
        key = (s.name, tuple(sorted(labels.items())))
        prev = merged.get(key)
        if prev is None:
            merged[key] = Sample(s.name, float(s.value), labels, s.kind, s.step, s.time, s.unit, s.description)
        else:
            v = max(prev.value, s.value) if s.name.endswith("/max") else prev.value + s.value
            merged[key] = Sample(s.name, v, labels, s.kind, s.step, s.time, s.unit, s.description)
    return out + list(merged.values())


def layout(tags: Iterable[str]) -> dict[str, dict[str, list[Any]]]:
    """The custom-scalars layout (tensorboardX form) for the families present in `tags`."""
    tags = list(tags)
    has = {t.split("/", 1)[0] for t in tags}
    out: dict[str, dict[str, list[Any]]] = {}
    if "goodput" in has:
        out["1. Goodput"] = {
            "goodput %": ["Multiline", [r"^goodput/goodput_pct$", r"^rolling/.*/goodput_pct$"]],
            "productive and elapsed seconds": ["Multiline", [r"^goodput/(productive|total_elapsed)_seconds$"]],
            "disruptions": ["Multiline", [r"^goodput/disruptions$"]],
        }
    if "badput" in has:
        out["2. Badput"] = {
            "badput % by bucket": ["Multiline", [r"^badput/.*_pct$"]],
            "badput seconds by bucket": ["Multiline", [r"^badput/.*_seconds$"]],
        }
    if "goodput" in has or "hosts" in has:
        out["3. Steps"] = {
            "ideal step time and deviation (s)": [
                "Multiline",
                [r"^goodput/(ideal_step_time|step_time_deviation)_seconds$"],
            ],
            "step time by host (s)": ["Multiline", [r"^hosts/"]],
            "last step": ["Multiline", [r"^goodput/(last_step|max_productive_step)$"]],
        }
    if "jax" in has:
        out["4. JAX compilation"] = {
            "compile seconds (total)": ["Multiline", [r"^jax/.*/sum(/|$)"]],
            "compiles (count)": ["Multiline", [r"^jax/.*/count(/|$)"]],
            "slowest compile (s)": ["Multiline", [r"^jax/.*/max(/|$)"]],
            "compilation cache": ["Multiline", [r"^jax/compilation_cache/"]],
            "checkpoint seconds (Orbax, total)": ["Multiline", [r"^jax/checkpoint/.*/sum(/|$)"]],
        }
    return out


def max_steps(logdir: str) -> dict[str, int]:
    """The largest step of each scalar tag in the event files already in `logdir`."""
    from tensorboardX.proto import event_pb2

    best: dict[str, int] = {}
    try:
        names = [n for n in os.listdir(logdir) if n.startswith("events.out.tfevents.")]
    except OSError:
        return best
    for name in names:
        for data in _records(os.path.join(logdir, name)):
            ev = event_pb2.Event()
            try:
                ev.ParseFromString(data)
            except Exception:
                break  # a torn last record: what came before counts
            if not ev.HasField("summary"):
                continue
            for v in ev.summary.value:
                if v.tag and ev.step > best.get(v.tag, -1):
                    best[v.tag] = int(ev.step)
    return best


def _records(path: str) -> Iterable[bytes]:
    """The payloads of a TFRecord file: [length u64][crc u32][data][crc u32] each."""
    try:
        with open(path, "rb") as f:
            while True:
                head = f.read(12)
                if len(head) < 12:
                    return
                (n,) = struct.unpack("<Q", head[:8])
                data = f.read(n)
                if len(data) < n or len(f.read(4)) < 4:
                    return
                yield data
    except OSError:
        return
