"""Labels that stay the same from one upload to the next, and what each stage derives from them.

The goodput monitor exports the same series every upload: at 256 hosts some 1,600 of them
(three step-time statistics per host, three straggler figures per rank, ...), of which only
the values and the step change. Their labels are `SeriesLabels`: a dict that cannot be
changed, built once per label set and reused across uploads, which remembers for each sample
name what the exporting stages derive from (name, labels) alone (`SeriesInfo`): the series
key, whether the name's placeholders are all present, the TensorBoard tag and its encoded
prefix. A sample with any other mapping for labels takes the general path, with the same
results (tests compare the two).

A SeriesLabels compares, iterates and serializes as the dict it holds, and pickles as a plain
dict (so what reaches another process never depends on this module).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields
from typing import Any, NoReturn

from mlgoodput.export._base import Sample
from mlgoodput.export._names import placeholder_names

SeriesKey = tuple[str, tuple[tuple[str, str], ...]]


class SeriesInfo:
    """What (name, labels) alone decides, computed once: `key` (series_key's answer), `ok`
    (every placeholder of the name has its label) and, filled by the TensorBoard exporter
    when it first writes the series, `tb` (tag, encoded prefix, tag family); by the Prometheus
    page, `prom` (what _prom_metrics.metric_families derives, with the kind and unit it holds for)."""

    __slots__ = ("key", "ok", "prom", "tb")

    def __init__(self, name: str, labels: SeriesLabels) -> None:
        self.key: SeriesKey = (name, tuple(sorted(labels.items())))
        self.ok = all(k in labels for k in placeholder_names(name))
        self.tb: tuple[str, bytes, str] | None = None
        self.prom: tuple[str, str, bool, str, float, list[str], list[str]] | None = None


class SeriesLabels(dict[str, str]):
    """An unchangeable label set (str -> str) that remembers a SeriesInfo per sample name."""

    __slots__ = ("memo",)

    def __init__(self, items: Iterable[tuple[str, str]]) -> None:
        super().__init__((str(k), str(v)) for k, v in items)
        self.memo: dict[str, SeriesInfo] = {}

    def info(self, name: str) -> SeriesInfo:
        got = self.memo.get(name)
        if got is None:
            got = self.memo[name] = SeriesInfo(name, self)
        return got

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("these labels are shared between samples and cannot be changed; copy them with dict(labels)")

    __setitem__ = __delitem__ = _read_only
    clear = pop = popitem = setdefault = update = _read_only

    def __ior__(self, other: Any) -> NoReturn:  # type: ignore[misc]
        self._read_only()

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))

    def copy(self) -> dict[str, str]:
        return dict(self)


_SETTERS = tuple(Sample.__dict__[f.name].__set__ for f in fields(Sample))  # the slots, in field order
_new = object.__new__


def new_sample(
    name: str,
    value: float,
    labels: Any,
    kind: str = "gauge",
    step: int | None = None,
    time: float | None = None,
    unit: str = "",
    description: str = "",
) -> Sample:
    """`Sample(name, value, labels, kind, step, time, unit, description)`, the same object,
    built in half the time (the frozen dataclass's __init__ sets each field through
    object.__setattr__); for code making thousands of samples an upload."""
    s = _new(Sample)
    a, b, c, d, e, f, g, h = _SETTERS
    a(s, name)
    b(s, value)
    c(s, labels)
    d(s, kind)
    e(s, step)
    f(s, time)
    g(s, unit)
    h(s, description)
    return s
