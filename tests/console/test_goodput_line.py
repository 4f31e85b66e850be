"""The console's live goodput line, read from the store the job's goodput recorder writes."""

from __future__ import annotations

import datetime as dt
import io
import time

import mlgoodput.console as C
from mlgoodput.goodput import GoodputRecorder
from waiting import wait_for


def test_goodput_line_appears_when_a_recorder_writes_the_job(sockdir: str) -> None:
    store = f"{sockdir}/store.db"
    screen = io.StringIO()
    with C.session(f"unix:{sockdir}/s.sock", job="gp", store=store, display=screen) as srv:
        assert srv.display is not None
        srv.display._goodput_every_s = 0.1  # instead of every 5 s
        srv.display._goodput_next = 0.0
        rec = GoodputRecorder("gp", "gp-logger", logging_enabled=True, store=store)
        t0 = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=100)
        rec.record_job_start_time(t0)
        for i in range(10):  # 10 productive seconds after 90 s of start-up
            rec.record_step_start_time(i, t0 + dt.timedelta(seconds=90 + i))
        rec.flush(10)
        text = wait_for(lambda: "last step 9" in screen.getvalue() and screen.getvalue(), what="the goodput line")
        rec.close()
        time.sleep(0.1)
    line = next(x for x in text.splitlines() if x.startswith("goodput"))
    assert "last step 9" in line
    pct = float(line.split()[1].rstrip("%"))
    assert 5.0 < pct < 15.0  # about 9 of ~100 seconds
