"""A training-like process for the recorder tests: `kill` mode waits to be killed,
`write` mode records its steps as fast as it can and exits cleanly."""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path

from mlgoodput.goodput import Recorder


def main() -> None:
    mode, store, job, host, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    rec = Recorder(job, f"goodput_{job}", True, store=store, process_index=host)
    if mode == "write":
        go = Path(sys.argv[6])
        Path(f"{go}.ready-{job}-{host}").touch()  # built and waiting
        while not go.exists():  # start together with the other writers
            time.sleep(0.01)
    rec.record_job_start_time()
    rec.record_tpu_init_start_time()
    rec.record_tpu_init_end_time()
    for i in range(n):
        rec.record_step_start_time(i)
        if mode == "write" and i % 250 == 0:
            rec.flush(60)  # many small transactions, interleaved with the other writers'
        if i % 100 == 99:
            rec.record_checkpoint_save_start_time(i)
            rec.record_checkpoint_save_end_time(i)
    rec.record_custom_badput_event_start_time(dt.datetime.now(), "eval_step")
    if mode == "kill":
        print("ready", flush=True)
        time.sleep(600)
    rec.record_custom_badput_event_end_time(custom_badput_event_type="eval_step")
    rec.record_job_end_time()
    ok = rec.flush(120)
    rec.close()
    sys.exit(0 if ok else 3)


if __name__ == "__main__":
    main()
