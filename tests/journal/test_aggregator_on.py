"""The journal's truth, SIGKILL and recovery tests again with the node shipper on
(MLGOODPUT_NODE_SHIPPER=1 for the test and the processes it starts): what they promise holds
whether a journal ships its own events or hands them to the node's shipper."""

from __future__ import annotations

import pytest

from mlgoodput import _env
from tests.journal import test_concurrent_recovery as _concurrent
from tests.journal import test_journal as _journal
from tests.journal import test_recover_on_read as _on_read
from tests.journal import test_recovery_order as _order
from tests.recorder import test_killed_job as _killed_job
from tests.recorder import test_recorder as _recorder

#: left out: tests of how a journal ships by itself (its own failures count; the node
#: shipper's tests say the same of it, tests/journal/test_aggregator.py), and tests of
#: memory stores (process-local: their journals ship themselves, and a named one would keep
#: the first run's events)
_NOT_HERE = {
    "test_unwritable_store_path_recovers_later",
    "test_full_disk_never_raises_and_loses_nothing",
    "test_no_journal_directory_keeps_events_in_memory",
    "test_oversized_name_is_the_callers_error",
    "test_property_whatever_is_appended_comes_out_the_same",
    "test_memory_store_objects_never_share_a_journal",
    "test_values_that_do_not_fit_are_refused_and_leave_nothing",
}


@pytest.fixture(autouse=True)
def _node_shipper_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_env.NODE_SHIPPER, "1")


#: the recorder's tests of processes that are killed, exit or write together
_RECORDER = (
    "test_sigkill_loses_nothing",
    "test_many_processes_write_one_store",
    "test_locked_store_never_raises_and_loses_nothing",
    "test_forked_child_records_into_its_own_journal",
    "test_a_fresh_calculator_sees_every_event_of_a_killed_process",
    "test_a_process_that_exits_without_close_ships_at_exit",
)

_HERE = globals()
for _mod in (_journal, _concurrent, _on_read, _order):
    for _name in dir(_mod):
        if _name.startswith("test_") and _name not in _NOT_HERE:
            _HERE[_name] = getattr(_mod, _name)
for _name in _RECORDER:
    _HERE[f"{_name}_recorder"] = getattr(_recorder, _name)
_HERE["test_a_killed_job_is_crashed_everywhere_and_its_total_stays"] = (
    _killed_job.test_a_killed_job_is_crashed_everywhere_and_its_total_stays
)
