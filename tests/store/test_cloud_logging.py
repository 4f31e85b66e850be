"""The Cloud Logging store against a fake LoggingServiceV2: batching, paging, retries,
the read quota, incremental reads, late entries, replays, URLs and the CLI's failures;
and `from_cloud_logger` over a seed-style cloud_logger double."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from typing import Any

import pytest

from mlgoodput import cli
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import Store, StoreError, from_cloud_logger, open_store
from mlgoodput.store._cloud_logging import CloudLoggingStore
from mlgoodput.store._logschema import to_event, to_payload

grpc = pytest.importorskip("grpc")


def steps(first: int, n: int, host: int = 0) -> list[Event]:
    return [Event(Kind.STEP_START, 1000.0 + i, host, step=i) for i in range(first, first + n)]


def fast(st: Store) -> CloudLoggingStore:
    """Quick backoff, so retry tests take milliseconds."""
    assert isinstance(st, CloudLoggingStore)
    st.retry_initial_s, st.retry_maximum_s = 0.01, 0.05
    return st


def writer() -> int:
    return uuid.uuid4().int >> 65


def test_writes_are_batched_and_pages_follow_tokens(fake_logging: Any, cloud_logging_url: str) -> None:
    st = open_store(cloud_logging_url)
    n_before = len(fake_logging.write_requests)
    st.append("goodput", "j", EventBatch(writer(), 0, steps(0, 2500)))
    assert fake_logging.write_requests[n_before:] == [1000, 1000, 500]
    first = len(fake_logging.list_requests)
    got = [e.step for e in st.read("goodput", "j").columns.events()]
    assert got == list(range(2500))
    calls = fake_logging.list_requests[first:]
    assert len(calls) == 3 and [bool(tok) for _, tok in calls] == [False, True, True]
    assert all(f == calls[0][0] for f, _ in calls)  # the same query, page after page
    st.close()


def test_incremental_reads_ask_only_for_new_entries(fake_logging: Any) -> None:
    st = open_store(fake_logging.url("p-incr-" + uuid.uuid4().hex[:6], settle="0"))
    w = writer()
    st.append("goodput", "j", EventBatch(w, 0, steps(0, 300)))
    r1 = st.read("goodput", "j")
    assert len(r1) == 300
    st.append("goodput", "j", EventBatch(w, 300, steps(300, 5)))
    mark = len(fake_logging.list_requests)
    r2 = st.read("goodput", "j", r1.cursor)
    assert [e.step for e in r2.columns.events()] == [300, 301, 302, 303, 304]
    flt, _ = fake_logging.list_requests[mark]
    assert "receiveTimestamp>=" in flt
    assert sum(fake_logging.list_returned[mark:]) <= 6  # the new entries (and the newest old one)
    assert len(st.read("goodput", "j", r2.cursor)) == 0
    assert [e.step for e in st.read("goodput", "j", 0).columns.events()] == list(range(305))
    st.close()


def test_an_entry_that_shows_up_late_is_read_once(fake_logging: Any) -> None:
    """The service may list an entry a little after newer ones; the settle window re-asks
    for recent entries and drops the ones already read."""
    st = open_store(fake_logging.url("p-late-" + uuid.uuid4().hex[:6], settle="60"))
    w1, w2 = writer(), writer()
    st.append("goodput", "j", EventBatch(w1, 0, steps(0, 3)))
    fake_logging.hold()
    st.append("goodput", "j", EventBatch(w2, 0, [Event(Kind.STEP_START, 2000.0, 0, step=99)]))
    fake_logging.holding = False  # later writes are visible at once; the held one is not yet
    st.append("goodput", "j", EventBatch(w1, 3, steps(3, 2)))
    r1 = st.read("goodput", "j")
    assert sorted(e.step for e in r1.columns.events()) == [0, 1, 2, 3, 4]
    fake_logging.release()
    r2 = st.read("goodput", "j", r1.cursor)
    assert [e.step for e in r2.columns.events()] == [99]
    assert len(st.read("goodput", "j", r2.cursor)) == 0
    st.close()


def test_replays_from_another_process_are_kept_once(cloud_logging_url: str) -> None:
    """A journal replayed by a new process (a new store object) writes the same insertIds;
    readers keep each (writer, seq) once."""
    w = writer()
    a, b = open_store(cloud_logging_url), open_store(cloud_logging_url)
    a.append("goodput", "j", EventBatch(w, 0, steps(0, 6)))
    b.append("goodput", "j", EventBatch(w, 2, steps(2, 6)))  # 2..5 again, then 6, 7
    reader = open_store(cloud_logging_url)
    assert sorted(e.step for e in reader.read("goodput", "j").columns.events()) == list(range(8))
    assert {(j.namespace, j.job): j.events for j in reader.jobs()} == {("goodput", "j"): 8}


@pytest.mark.parametrize("code", ["UNAVAILABLE", "RESOURCE_EXHAUSTED", "INTERNAL", "DEADLINE_EXCEEDED"])
def test_transient_errors_are_retried(fake_logging: Any, cloud_logging_url: str, code: str) -> None:
    st = fast(open_store(cloud_logging_url))
    status = getattr(grpc.StatusCode, code)
    fake_logging.fail_next("WriteLogEntries", status, 2)
    st.append("goodput", "j", EventBatch(writer(), 0, steps(0, 10)))
    fake_logging.fail_next("ListLogEntries", status, 2)
    assert len(st.read("goodput", "j")) == 10
    assert fake_logging.pending_failures("WriteLogEntries") == fake_logging.pending_failures("ListLogEntries") == 0


@pytest.mark.slow
def test_reads_back_off_under_the_read_quota(fake_logging: Any, cloud_logging_url: str) -> None:
    st = fast(open_store(cloud_logging_url))
    st.append("goodput", "j", EventBatch(writer(), 0, steps(0, 4500)))
    before = fake_logging.rejected["ListLogEntries"]
    fake_logging.list_quota(2, period_s=0.2)
    try:
        assert len(st.read("goodput", "j")) == 4500  # five pages, two per 0.2 s
    finally:
        fake_logging.list_quota(None)
    assert fake_logging.rejected["ListLogEntries"] > before


def test_a_lasting_outage_is_one_store_error_and_nothing_is_lost(fake_logging: Any) -> None:
    st = fast(open_store(fake_logging.url("p-down-" + uuid.uuid4().hex[:6], deadline="0.3")))
    w = writer()
    fake_logging.fail_next("WriteLogEntries", grpc.StatusCode.UNAVAILABLE, 1000)
    try:
        with pytest.raises(StoreError, match=r"WriteLogEntries failed") as info:
            st.append("goodput", "j", EventBatch(w, 0, steps(0, 5)))
        assert "\n" not in str(info.value)
    finally:
        fake_logging.clear_failures()
    st.append("goodput", "j", EventBatch(w, 0, steps(0, 5)))  # the journal ships it again
    assert [e.step for e in st.read("goodput", "j").columns.events()] == [0, 1, 2, 3, 4]
    fake_logging.fail_next("ListLogEntries", grpc.StatusCode.PERMISSION_DENIED, 1)
    with pytest.raises(StoreError, match="ListLogEntries failed"):
        open_store(st.url).read("goodput", "j")


def test_jobs_lists_the_log_of_the_url_or_the_whole_project(fake_logging: Any) -> None:
    project = "p-jobs-" + uuid.uuid4().hex[:6]
    st = open_store(fake_logging.url(project))
    st.append("log-a", "j1", EventBatch(writer(), 0, steps(0, 3)))
    st.append("log-b", "j2", EventBatch(writer(), 0, steps(0, 2)))
    everything = {(j.namespace, j.job, j.events) for j in st.jobs()}
    assert everything == {("log-a", "j1", 3), ("log-b", "j2", 2)}
    one = open_store(fake_logging.url(project, "log-b"))
    assert [(j.namespace, j.job, j.events, j.first_time, j.last_time) for j in one.jobs()] == [
        ("log-b", "j2", 2, 1000.0, 1001.0)
    ]
    st.append("log-b", "j2", EventBatch(writer(), 0, steps(5, 1)))
    assert [j.events for j in one.jobs()] == [3]  # later listings read only what is new


def test_every_event_kind_survives_the_payload_schema() -> None:
    evs = [
        Event(Kind.JOB_START, 1.5),
        Event(Kind.STEP_START, 2.0, step=3),
        Event(Kind.STEP_END, 2.5, 1, step=3),
        Event(Kind.CUSTOM_START, 3.0, name="eval"),
        Event(Kind.CKPT_SAVE, 4.0, step=7, value=1.25),
        Event(Kind.CKPT_RESTORE, 5.0, 2, step=7, value=0.5),
        Event(Kind.ELASTIC_WAIT_END, 6.0, name="scale_up"),
        Event(Kind.SLICE_COUNTS, 7.0, attrs={"active": 1, "total": 2, "available": 2}),
        Event(Kind.COMPILE, 8.0, value=3.5, name="train_step"),
        Event(Kind.METRIC, 9.0, step=None, value=0.25, name="loss", attrs={"unit": "nats", "tags": [1, "x"]}),
        Event(Kind.CKPT_SAVE_START, 10.0, step=8),
        Event(Kind.ELASTIC_REINIT_END, 11.0, 4),
    ]
    for e in evs:
        p = json.loads(json.dumps(to_payload("job", e)))  # what a JSON payload can carry
        assert p["job_name"] == "job"
        assert to_event(p) == e, p
    # the seed's own keys for what its schema holds
    assert to_payload("job", evs[1]) == {"job_name": "job", "step_count": 3, "step_start_time": 2.0}
    assert to_payload("job", evs[3]) == {
        "job_name": "job",
        "custom_badput_event_type": "eval",
        "custom_badput_event_start_time": 3.0,
    }
    assert to_event({"job_name": "job", "some": "other entry"}) is None


def test_urls_fail_fast_and_name_the_argument() -> None:
    for bad, msg in [
        ("cloudlogging://", "expected cloudlogging://PROJECT"),
        ("cloudlogging://Bad_Project/log", "expected cloudlogging://PROJECT"),
        ("cloudlogging://p/log?color=red", "unknown option 'color'"),
        ("cloudlogging://p/log?insecure=true", "insecure=true needs endpoint"),
        ("cloudlogging://p/log?settle=-1", "settle must be"),
        ("cloudlogging://p/bad%20log", "a log name has only"),
    ]:
        with pytest.raises(ValueError, match=f"^store: .*{msg}"):
            open_store(bad)
    st = open_store("cloudlogging://my-project/goodput_job?settle=5")
    assert isinstance(st, CloudLoggingStore) and st.log == "goodput_job" and st.settle_ns == 5 * 10**9
    with pytest.raises(StoreError, match="not a valid Cloud Logging log name"):
        st.append("bad name", "j", EventBatch(1, 0, steps(0, 1)))


def test_the_cli_says_an_unreachable_service_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"cloudlogging://p/log?endpoint=127.0.0.1:{port}&insecure=true&deadline=0.3"
    assert cli.main(["report", "--store", url, "--job", "j"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mlgoodput: error: Cloud Logging store") and err.count("\n") == 1
    assert "Traceback" not in err


class SeedStyleCloudLogger:
    """A cloud_logger as ml-goodput-measurement's own tests build one: it keeps entries in
    memory, ignores `last_entry_info` and returns everything on every read."""

    def __init__(self, job_name: str) -> None:
        self.job_name = job_name
        self.entries: list[dict[str, Any]] = []
        self.reads = 0

    def write_cloud_logging_entry(self, entry: dict[str, Any]) -> None:
        self.entries.append(json.loads(json.dumps(entry)))

    def read_cloud_logging_entries(
        self, start_time: dt.datetime | None = None, end_time: dt.datetime | None = None, last_entry_info: Any = None
    ) -> tuple[list[dict[str, Any]], Any]:
        self.reads += 1
        return list(self.entries), (None, None)


def test_from_cloud_logger_wraps_any_cloud_logger() -> None:
    cl = SeedStyleCloudLogger("job")
    st = from_cloud_logger(cl, "goodput_job")
    assert isinstance(st, Store) and st.url.startswith("cloudlogger://goodput_job/job#")
    assert from_cloud_logger(cl, "goodput_job").url == st.url  # the same logger: the same URL
    w = writer()
    st.append("goodput_job", "job", EventBatch(w, 0, steps(0, 4)))
    st.append("goodput_job", "job", EventBatch(w, 0, steps(0, 6)))  # a replay: 4, 5 are new
    assert cl.entries[0] == {"job_name": "job", "step_count": 0, "step_start_time": 1000.0}
    assert len(cl.entries) == 6
    r1 = st.read("goodput_job", "job")
    assert [e.step for e in r1.columns.events()] == list(range(6))
    cl.write_cloud_logging_entry({"job_name": "job", "job_end_time": 2000.0})  # the seed wrote this
    cl.write_cloud_logging_entry({"job_name": "job", "step_count": 2, "step_start_time": 1002.0})  # twice
    r2 = st.read("goodput_job", "job", r1.cursor)
    assert [(e.kind, e.time) for e in r2.columns.events()] == [(Kind.JOB_END, 2000.0)]
    assert [(j.namespace, j.job, j.events) for j in st.jobs()] == [("goodput_job", "job", 7)]
    assert len(st.read("other-log", "job")) == 0
    with pytest.raises(StoreError, match="holds only log 'goodput_job'"):
        st.append("other-log", "job", EventBatch(w, 6, steps(6, 1)))
    with pytest.raises(StoreError, match="for job 'job'"):
        st.append("goodput_job", "another-job", EventBatch(w, 6, steps(6, 1)))
    with pytest.raises(TypeError, match="cloud_logger must have a write_cloud_logging_entry"):
        from_cloud_logger(object(), "log")
    with pytest.raises(ValueError, match="logger_name"):
        from_cloud_logger(cl, "")


def test_from_cloud_logger_turns_a_failing_logger_into_store_errors() -> None:
    class Broken(SeedStyleCloudLogger):
        def write_cloud_logging_entry(self, entry: dict[str, Any]) -> None:
            raise ConnectionError("no route")

    st = from_cloud_logger(Broken("job"), "log")
    with pytest.raises(StoreError, match="write_cloud_logging_entry failed: no route"):
        st.append("log", "job", EventBatch(1, 0, steps(0, 1)))


def test_the_recorder_ships_its_journal_to_cloud_logging(
    fake_logging: Any, cloud_logging_url: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlgoodput.accounting import GoodputCalculator
    from mlgoodput.goodput import GoodputRecorder

    monkeypatch.setenv("MLGOODPUT_JOURNAL_DIR", str(tmp_path / "journals"))
    t0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    rec = GoodputRecorder("rec-job", "goodput_rec", True, store=cloud_logging_url)
    rec.record_job_start_time(t0)
    for i in range(20):
        rec.record_step_start_time(i, t0 + dt.timedelta(seconds=5 + i))
    rec.record_job_end_time(t0 + dt.timedelta(seconds=25))
    assert rec.flush(30)
    rec.close()
    assert fake_logging.payloads("goodput_rec")[0] == {"job_name": "rec-job", "job_start_time": t0.timestamp()}
    r = GoodputCalculator("rec-job", "goodput_rec", store=open_store(cloud_logging_url)).report()
    assert r.total_s == pytest.approx(25.0) and r.last_step == 19


def test_the_jobs_command_lists_cloud_logging_jobs(fake_logging: Any, capsys: pytest.CaptureFixture[str]) -> None:
    project = "p-cli-" + uuid.uuid4().hex[:6]
    st = open_store(fake_logging.url(project))
    st.append("goodput_a", "a", EventBatch(writer(), 0, steps(0, 4)))
    assert cli.main(["jobs", "--store", fake_logging.url(project), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    keys = ("job", "logger", "events", "first_time", "last_time")  # `jobs` adds goodput, duration, status
    assert [{k: r[k] for k in keys} for r in rows] == [
        {"job": "a", "logger": "goodput_a", "events": 4, "first_time": 1000.0, "last_time": 1003.0}
    ]
    assert rows[0]["status"] == "empty" and rows[0]["goodput_pct"] is None  # steps, no job start


def test_a_recorder_writes_through_a_cloud_logger(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorder's journal ships to a `from_cloud_logger` store: the logger gets the
    seed's own entries; a second logger of the same job gets only its own."""
    from mlgoodput.goodput import GoodputRecorder

    monkeypatch.setenv("MLGOODPUT_JOURNAL_DIR", str(tmp_path))
    t0 = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    loggers = [SeedStyleCloudLogger("job"), SeedStyleCloudLogger("job")]
    for n, cl in enumerate(loggers):
        rec = GoodputRecorder("job", "log", True, store=from_cloud_logger(cl, "log"))
        rec.record_step_start_time(n, t0)
        assert rec.flush(30)
        rec.close()
    assert [c.entries for c in loggers] == [
        [{"job_name": "job", "step_count": n, "step_start_time": t0.timestamp()}] for n in (0, 1)
    ]


def test_a_read_that_fails_on_a_later_page_loses_nothing(fake_logging: Any, cloud_logging_url: str) -> None:
    # the default deadline: a 0.2 s one timed out a 1,000-entry page on a loaded machine, so
    # the read failed on page 1 (DEADLINE_EXCEEDED) before it reached the refused later page
    st = fast(open_store(cloud_logging_url))
    st.append("goodput", "j", EventBatch(writer(), 0, steps(0, 2500)))
    reader = fast(open_store(cloud_logging_url))
    fake_logging.fail_next("ListLogEntries", grpc.StatusCode.PERMISSION_DENIED, 1)  # not retried
    with pytest.raises(StoreError):
        reader.read("goodput", "j")
    fake_logging.fail_next("ListLogEntries", grpc.StatusCode.PERMISSION_DENIED, 1, later_pages=True)
    with pytest.raises(StoreError, match="ListLogEntries failed"):
        reader.read("goodput", "j")  # page 1 arrived, page 2 was refused
    assert fake_logging.pending_failures("ListLogEntries") == 0
    assert sorted(e.step for e in reader.read("goodput", "j").columns.events()) == list(range(2500))


def test_entries_that_are_not_goodput_events_are_counted_and_said_once(
    fake_logging: Any, cloud_logging_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    st = open_store(cloud_logging_url)
    client = fake_logging.client(cloud_logging_url.split("//")[1].split("?")[0])
    for n in range(2):
        client.logger("goodput").log_struct({"job_name": "j", "note": f"not an event {n}"})
    st.append("goodput", "j", EventBatch(writer(), 0, steps(0, 2)))
    with caplog.at_level("WARNING", logger="mlgoodput.store"):
        assert len(st.read("goodput", "j")) == 2
    assert st.skipped == 2  # type: ignore[attr-defined]
    assert len([r for r in caplog.records if "not a goodput event" in r.getMessage()]) == 1


def test_big_entries_split_a_write_below_the_request_size_limit(fake_logging: Any, cloud_logging_url: str) -> None:
    st = open_store(cloud_logging_url)
    big = [Event(Kind.METRIC, 1.0 + i, value=1.0, name="blob", attrs={"text": "x" * 200_000}) for i in range(60)]
    mark = len(fake_logging.write_requests)
    st.append("goodput", "j", EventBatch(writer(), 0, big))  # 12 MB in all; the service takes 10 MB
    assert len(fake_logging.write_requests[mark:]) == 2 and sum(fake_logging.write_requests[mark:]) == 60
    assert len(st.read("goodput", "j")) == 60
