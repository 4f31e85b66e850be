"""An exporter written only for the tests: `list`, latest values kept in a table in memory.

It exists to show what adding an exporter takes: this module (the exporter, its one
registration line and its contract case) and one import line in tests/export/conftest.py;
the whole exporter contract suite (test_export_contract.py) then runs against it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path

from tests.export.cases import Backend, contract_case

from mlgoodput.export import Sample, make_exporter
from mlgoodput.export._process import SeriesKey, series_key
from mlgoodput.export._registry import register_exporter

#: the counterpart: table name -> latest value of each series; a table in DOWN refuses writes
TABLES: dict[str, dict[SeriesKey, float]] = {}
DOWN: set[str] = set()


class ListExporter:
    """Writes the latest value of each series into `TABLES[table]`."""

    def __init__(self, table: str) -> None:
        if not isinstance(table, str) or not table:
            raise ValueError(f"table must be a non-empty string, got {table!r}")
        self.table = table

    def export(self, samples: Sequence[Sample]) -> None:
        if self.table in DOWN:
            raise ConnectionError(f"table {self.table!r} is down")
        rows = TABLES.setdefault(self.table, {})
        for s in samples:
            rows[series_key(s)] = s.value

    def shutdown(self, timeout_s: float | None = None) -> None:
        pass


register_exporter("list", ListExporter)


@contract_case("list", "list")
def _list_case(tmp_path: Path) -> Iterator[Backend]:
    table = uuid.uuid4().hex
    exp = make_exporter("list", table=table)

    def read(name: str, labels: dict[str, str]) -> float | None:
        return TABLES.get(table, {}).get(series_key(Sample(name, 0.0, labels)))

    yield Backend("list", exp, read, lambda: DOWN.add(table), lambda: DOWN.discard(table), lambda n: 1.0)
    exp.shutdown()
    TABLES.pop(table, None)
