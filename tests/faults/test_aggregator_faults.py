"""The journal's fault trials again with the node shipper on (MLGOODPUT_NODE_SHIPPER=1 for
the trial and the processes it starts): a store deleted or replaced mid-run, damaged bytes
and headers, small disks and file-size limits, a torn last record, the first report after a
crash. What each trial promises holds when the node's shipper stores the events."""

from __future__ import annotations

import pytest

from mlgoodput import _env
from tests.faults import test_faults as _faults

_TAKEN = (
    "test_store_deleted_or_replaced_mid_run_loses_nothing",
    "test_flipped_bytes_never_store_wrong_values_and_every_loss_is_reported",
    "test_a_file_with_both_headers_damaged_is_set_aside_and_reported",
    "test_file_size_limit_loses_nothing",
    "test_small_filesystem_gets_small_segments_and_loses_nothing",
    "test_a_last_record_whose_length_reads_zero_is_kept",
    "test_the_first_report_after_a_crash_reads_every_step",
    "test_memory_fallback_is_reported_with_count_and_place",
)


@pytest.fixture(autouse=True)
def _node_shipper_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_env.NODE_SHIPPER, "1")


_HERE = globals()
for _name in _TAKEN:
    _HERE[_name] = getattr(_faults, _name)
