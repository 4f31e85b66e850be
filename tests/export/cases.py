"""The exporter contract suite's cases: one per exporter setup, each with its real counterpart.

A case is a generator taking a temporary folder: it builds an exporter and its
counterpart, yields a `Backend` for test_export_contract.py, then tears both down.
`@contract_case(case, exporter)` registers one under the name the exporter is registered
with (`make_exporter`); test_exporter_registry.py checks that every registered exporter
has at least one case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from mlgoodput.export import Exporter


@dataclass
class Backend:
    """An exporter plus `read(sample_name, labels) -> latest value the real counterpart holds`."""

    name: str
    exporter: Exporter
    read: Callable[[str, dict[str, str]], float | None]
    make_down: Callable[[], None] | None  # make the counterpart fail; None: cannot fail
    make_up: Callable[[], None] | None
    factor: Callable[[str], float]  # backend value = sample value * factor(name)


Case = Callable[[Path], Iterator[Backend]]
#: case name -> (the exporter's registered name, the case)
CASES: dict[str, tuple[str, Case]] = {}


def contract_case(name: str, exporter: str) -> Callable[[Case], Case]:
    def add(case: Case) -> Case:
        CASES[name] = (exporter, case)
        return case

    return add
