"""`Api.links`: a job, its ML run and its console job point at each other only when the
store holds them, and the job, run and console answers carry those links."""

from __future__ import annotations

import time

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore
from mlgoodput.ui._api import CONSOLE_NS, RUNS_NS, Api

_writer = iter(range(1, 1000))


def put(store: SQLiteStore, namespace: str, job: str, t: float) -> None:
    store.append(namespace, job, EventBatch(next(_writer), 0, [Event(Kind.LOG, t, name="x")]))


def test_links_follow_what_the_store_holds(store: SQLiteStore) -> None:
    t = time.time()
    put(store, "goodput_train", "train", t)
    put(store, RUNS_NS, "train-20260101-000000-abcd", t)  # an older run of the same training
    put(store, RUNS_NS, "train-1a2b3c4d", t + 5)  # the newest: the one linked
    put(store, RUNS_NS, "train-sim-1a2b3c4d", t + 9)  # another training's run
    put(store, CONSOLE_NS, "train", t)
    put(store, "goodput_alone", "alone", t)
    put(store, RUNS_NS, "orphan-1a2b3c4d", t)
    api = Api(store)
    try:
        full = {"job": "/jobs/train", "run": "/runs/train-1a2b3c4d", "console": "/console/train"}
        assert api.links("train") == full
        assert api.links("train-1a2b3c4d") == full  # from the run's page
        older = api.links("train-20260101-000000-abcd")
        assert older["run"] == "/runs/train-20260101-000000-abcd" and older["job"] == "/jobs/train"
        assert api.links("alone") == {"job": "/jobs/alone", "run": None, "console": None}
        assert api.links("orphan-1a2b3c4d") == {"job": None, "run": "/runs/orphan-1a2b3c4d", "console": None}
        assert api.links("train-sim")["run"] == "/runs/train-sim-1a2b3c4d"
        assert api.links("nothing") == {"job": None, "run": None, "console": None}
    finally:
        api.close()


def test_links_quote_the_name(store: SQLiteStore) -> None:
    put(store, "goodput_a/b c", "a/b c", time.time())
    api = Api(store)
    try:
        assert api.links("a/b c")["job"] == "/jobs/a%2Fb%20c"
    finally:
        api.close()
