"""Run the fault trials of tests/faults and print their table: recorded, stored (or kept in the
journal for the next process), reported lost, and the time of the step under test.

    python bench/bench_faults.py            # every trial (about a minute)
"""

from __future__ import annotations

import logging
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.faults import trials as T


def main() -> int:
    logging.disable(logging.WARNING)  # the trials provoke warnings on purpose; the table says what happened
    root = Path(tempfile.mkdtemp(prefix="mlgoodput-faults-"))
    os.environ["XDG_DATA_HOME"] = str(root / "xdg")
    os.environ["MLGOODPUT_RUNTIME_DIR"] = str(root / "runtime")
    n = 0

    def tmp() -> Path:
        nonlocal n
        n += 1
        d = root / f"trial{n}"
        d.mkdir()
        return d

    rows: list[T.Trial] = []
    steps: list[Callable[[], T.Trial | list[T.Trial]]] = [
        lambda: T.store_swapped(tmp(), "deleted"),
        lambda: T.store_swapped(tmp(), "replaced"),
        lambda: _flips(tmp()),
        lambda: T.both_headers_damaged(tmp()),
        lambda: T.file_size_limit(tmp()),
        lambda: _small(tmp()),
        lambda: T.sqlite_locked(tmp(), deadline=1.0),
        lambda: T.postgres_down(tmp(), deadline=1.0),
        lambda: T.postgres_down(tmp(), deadline=1.0, hanging=True),
        lambda: T.memory_fallback(tmp()),
        lambda: T.exporter_stop("down"),
        lambda: T.exporter_stop("hanging"),
        lambda: T.monitor_stop_with_failing_exporter(tmp()),
        T.time_wait_port,
        T.busy_port_retried,
        lambda: T.monitor_cli_busy_port(tmp()),
        T.console_under_strangers,
        lambda: T.ondemand_under_strangers(tmp()),
        T.prometheus_under_strangers,
        lambda: T.unix_paths_are_not_ours(tmp()),
        lambda: T.monitor_stop_with_failing_exporter(tmp(), timeout_s=None),
        lambda: T.zero_length_last_record(tmp()),
        lambda: T.first_report_after_crash(tmp()),
        lambda: T.console_store_down(tmp(), "locked"),
        lambda: T.console_store_down(tmp(), "down"),
        lambda: T.tensorboard_unwritable(tmp()),
        T.ui_under_strangers,
        lambda: T.ui_profile_paths(tmp()),
        T.silent_profile_endpoint,
    ]
    for step in steps:
        r = step()
        rows.extend(r if isinstance(r, list) else [r])
    w = max(len(r.name) for r in rows)
    print(f"{'trial':<{w}}  {'recorded':>9}  {'stored':>9}  {'lost':>6}  {'damaged':>7}  {'seconds':>7}  ok  note")
    bad = 0
    for r in rows:
        ok = r.balanced and r.lost <= r.damaged
        bad += not ok
        print(
            f"{r.name:<{w}}  {r.recorded:>9,}  {r.stored:>9,}  {r.lost:>6,}  {r.damaged:>7,}  {r.seconds:>7.2f}"
            f"  {'ok' if ok else 'NO'}  {r.note}"
        )
    T.cleanup(root)
    return 1 if bad else 0


def _flips(tmp: Path) -> T.Trial:
    """The flipped-byte trials summed into one row (each is also checked on its own)."""
    rs = T.flipped_bytes(tmp)
    bad = [r.name for r in rs if not (r.balanced and r.lost <= r.damaged)]
    return T.Trial(
        f"one byte flipped, {len(rs)} offsets",
        sum(r.recorded for r in rs),
        sum(r.stored for r in rs),
        sum(r.lost for r in rs),
        sum(r.seconds for r in rs),
        damaged=sum(r.damaged for r in rs),
        note=f"{sum(1 for r in rs if r.lost)} offsets lost a record; unbalanced: {bad or 'none'}",
    )


def _small(tmp: Path) -> T.Trial:
    with T.small_fs(tmp) as mnt:
        if mnt is None:
            return T.Trial("6 MB filesystem", 0, 0, 0, 0.0, note=f"skipped: {T.small_fs.why}")  # type: ignore[attr-defined]
        return T.small_filesystem(mnt, tmp)


if __name__ == "__main__":
    sys.exit(main())
