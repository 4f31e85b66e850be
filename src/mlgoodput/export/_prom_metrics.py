"""How Samples become Prometheus metric families that `promtool check metrics` accepts.

- A name gets `mlgoodput_` + its family (see `_names`); `_pct` becomes a 0..1 `_ratio`; a
  value in seconds (unit `s`) ends in `_seconds`.
- Counters end in `_total` (prometheus_client adds it).
- A series exported as `<name>/bucket` (cumulative, with an `le` label), `<name>/count` and
  `<name>/sum` (the JAX compile-time histograms) becomes one real histogram family
  `<name>_seconds` with `_bucket`, `_count` and `_sum`.
- Every family has a help text.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from mlgoodput.export._base import Sample
from mlgoodput.export._names import family, label_name
from mlgoodput.export._series import SeriesLabels

PREFIX = "mlgoodput_"
_HIST_PARTS = ("/bucket", "/count", "/sum")
_UNITS = {"s": "_seconds", "seconds": "_seconds", "By": "_bytes", "bytes": "_bytes"}


def prometheus_name(sample_name: str, kind: str = "gauge", unit: str = "") -> tuple[str, float]:
    """(metric name, factor) for a sample: `mlgoodput_` + family, `_pct` as a 0..1 `_ratio`,
    and the base-unit suffix of `unit` when the name does not already end with it."""
    fam = family(sample_name)
    factor = 1.0
    if fam.endswith("_pct"):
        fam, factor = fam[: -len("_pct")] + "_ratio", 0.01
    suffix = _UNITS.get(unit, "")
    if suffix and not fam.endswith(suffix):
        fam += suffix
    if kind == "counter" and fam.endswith("_total"):
        fam = fam[: -len("_total")]  # prometheus_client adds it back
    return PREFIX + fam, factor


def _key(labels: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((label_name(k), str(v)) for k, v in labels.items()))


def metric_families(samples: Sequence[Sample], core: Any) -> Iterator[Any]:
    """Prometheus metric families (prometheus_client.core objects) for the latest samples."""
    # the unit of a histogram is its buckets' (its `/count` sample has none)
    hist_units = {s.name[: -len("/bucket")]: s.unit or "" for s in samples if s.name.endswith("/bucket")}
    families: dict[str, Any] = {}
    hists: dict[str, dict[tuple[tuple[str, str], ...], dict[str, Any]]] = {}
    hist_meta: dict[str, tuple[str, str]] = {}
    for s in samples:
        labels = s.labels
        if type(labels) is SeriesLabels:  # what the series gives, derived once (see _series)
            info = labels.memo.get(s.name) or labels.info(s.name)
            pm = info.prom
            if pm is None or pm[0] != s.kind or pm[1] != s.unit:
                pm = info.prom = _prom_series(s, labels)
            if not pm[2]:  # not part of a histogram: as below
                _, _, _, name, factor, keys, values = pm
                fam = families.get(name)
                if fam is None:
                    doc = s.description or f"mlgoodput {s.name}"
                    if s.kind == "counter":
                        fam = core.CounterMetricFamily(name, doc, labels=keys)
                    else:
                        fam = core.GaugeMetricFamily(name, doc, labels=keys)
                    families[name] = fam
                try:
                    fam.add_metric(values, float(s.value) * factor)
                except Exception:
                    pass  # a label set that does not match the family's: skip it, keep serving
                continue
        base = next((s.name[: -len(p)] for p in _HIST_PARTS if s.name.endswith(p)), None)
        if base is not None and base in hist_units:
            labels = {k: v for k, v in s.labels.items() if k != "le"}
            name, _ = prometheus_name(base, "histogram", hist_units[base])
            series = hists.setdefault(name, {}).setdefault(_key(labels), {"buckets": [], "sum": 0.0})
            if s.name.endswith("/bucket"):
                series["buckets"].append((str(s.labels.get("le", "+Inf")), float(s.value)))
            elif s.name.endswith("/sum"):
                series["sum"] = float(s.value)
            hist_meta[name] = (base, hist_units[base])
            continue
        name, factor = prometheus_name(s.name, s.kind, s.unit)
        fam = families.get(name)
        keys = [k for k, _ in _key(dict(s.labels))]
        if fam is None:
            doc = s.description or f"mlgoodput {s.name}"
            if s.kind == "counter":
                fam = core.CounterMetricFamily(name, doc, labels=keys)
            else:
                fam = core.GaugeMetricFamily(name, doc, labels=keys)
            families[name] = fam
        try:
            fam.add_metric([v for _, v in _key(dict(s.labels))], float(s.value) * factor)
        except Exception:
            continue  # a label set that does not match the family's: skip it, keep serving
    yield from families.values()
    for name, by_labels in hists.items():
        base, unit = hist_meta[name]
        keys = [k for k, _ in next(iter(by_labels))]
        doc = f"jax.monitoring /{base} ({'seconds' if unit == 's' else 'value'}), a histogram"
        fam = core.HistogramMetricFamily(name, doc, labels=keys)
        for key, series in by_labels.items():
            buckets = _buckets(series["buckets"])
            if not buckets:
                continue
            try:
                fam.add_metric([v for _, v in key], buckets, series["sum"])
            except Exception:
                continue
        yield fam


def _prom_series(s: Sample, labels: SeriesLabels) -> tuple[str, str, bool, str, float, list[str], list[str]]:
    """(kind, unit, part of a histogram, metric name, factor, label names, label values) of a
    series, as metric_families derives them for each sample."""
    name, factor = prometheus_name(s.name, s.kind, s.unit)
    key = _key(dict(labels))
    hist = any(s.name.endswith(p) for p in _HIST_PARTS)
    return (s.kind, s.unit, hist, name, factor, [k for k, _ in key], [v for _, v in key])


def _buckets(raw: Iterable[tuple[str, float]]) -> list[tuple[str, float]]:
    """Cumulative buckets sorted by bound, ending with +Inf (added from the largest if missing)."""
    out = sorted(raw, key=lambda b: math.inf if b[0] == "+Inf" else float(b[0]))
    if out and out[-1][0] != "+Inf":
        out.append(("+Inf", out[-1][1]))
    return out
