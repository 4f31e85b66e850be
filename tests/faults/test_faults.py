"""The fault trials (see trials.py): in every one, recorded = stored + reported lost, and
events are reported lost only where bytes were damaged, at most one per damaged record.
Close and stop paths return by their deadlines; servers keep serving a good client while
strangers hold a thousand connections."""

from __future__ import annotations

from pathlib import Path

import pytest

from . import trials as T


def _check(t: T.Trial) -> None:
    assert t.balanced, t
    assert t.lost <= t.damaged, t


@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_store_deleted_or_replaced_mid_run_loses_nothing(tmp_path: Path, how: str) -> None:
    t = T.store_swapped(tmp_path, how)
    _check(t)
    assert t.lost == 0 and "replacement seen 0x" not in t.note


@pytest.mark.slow
def test_flipped_bytes_never_store_wrong_values_and_every_loss_is_reported(tmp_path: Path) -> None:
    results = T.flipped_bytes(tmp_path)
    assert len(results) >= 70
    for t in results:
        _check(t)
    assert sum(t.lost for t in results) > 0  # the damage was real, and it was reported
    assert all(t.lost == 0 for t in results if "header" in t.name)  # one copy of the header suffices


def test_a_file_with_both_headers_damaged_is_set_aside_and_reported(tmp_path: Path) -> None:
    t = T.both_headers_damaged(tmp_path)
    _check(t)
    assert t.lost == t.recorded and "set aside as .damaged: True" in t.note
    # where users look: the store's lost stream, under the job its file name gives
    assert t.in_lost_stream == t.recorded and "('ns', 'job')" in t.note


@pytest.mark.slow
def test_file_size_limit_loses_nothing(tmp_path: Path) -> None:
    t = T.file_size_limit(tmp_path, n=60_000, fsize=512 << 10)
    _check(t)
    assert t.lost == 0 and t.seconds <= 3.0 + 0.5


def test_small_filesystem_gets_small_segments_and_loses_nothing(tmp_path: Path) -> None:
    with T.small_fs(tmp_path) as mnt:
        if mnt is None:
            pytest.skip(f"cannot mount a small tmpfs here: {T.small_fs.why}")  # type: ignore[attr-defined]
        t = T.small_filesystem(mnt, tmp_path)
    _check(t)
    assert t.lost == 0 and "flush ok=True" in t.note


@pytest.mark.slow
def test_sqlite_locked_close_keeps_its_deadline(tmp_path: Path) -> None:
    t = T.sqlite_locked(tmp_path, deadline=1.0)
    _check(t)
    assert t.lost == 0 and t.seconds <= 1.0 + 0.5


@pytest.mark.slow
@pytest.mark.parametrize("hanging", [False, True])
def test_postgres_down_or_hanging_close_keeps_its_deadline(tmp_path: Path, hanging: bool) -> None:
    pytest.importorskip("psycopg", reason="the PostgreSQL store needs the postgres extra")
    t = T.postgres_down(tmp_path, deadline=1.0, hanging=hanging)
    _check(t)
    assert t.lost == 0 and t.seconds <= 1.0 + 0.5


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["down", "hanging"])
def test_exporter_stop_keeps_its_deadline(kind: str) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="needs the otlp extra")
    t = T.exporter_stop(kind, timeout_s=4.0)
    assert t.seconds <= 4.0 + 0.5, t


@pytest.mark.slow
def test_monitor_stop_tries_a_failing_backend_once(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="needs the otlp extra")
    t = T.monitor_stop_with_failing_exporter(tmp_path)
    assert t.seconds < 10, t


@pytest.mark.slow
def test_a_refused_otlp_endpoint_does_not_hold_the_stop_for_its_timeout(tmp_path: Path) -> None:
    """With the OTLP exporter's default 10 s timeout: the refused endpoint fails its last try
    at once (OpenTelemetry would retry a refused connection for the whole timeout)."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="needs the otlp extra")
    t = T.monitor_stop_with_failing_exporter(tmp_path, timeout_s=None)
    assert t.seconds < 8, t


@pytest.mark.slow
def test_prometheus_port_in_time_wait_is_bound_at_once() -> None:
    t = T.time_wait_port()
    assert t.stored == 1 and "serving" in t.note and "TIME_WAIT: True" in t.note, t


@pytest.mark.slow
def test_prometheus_port_held_elsewhere_is_retried_not_raised() -> None:
    t = T.busy_port_retried(hold_s=1.0)
    assert t.stored == 1 and "waiting for port" in t.note, t


@pytest.mark.slow
def test_monitor_cli_keeps_running_on_a_held_port_and_serves_once_free(tmp_path: Path) -> None:
    pytest.importorskip("prometheus_client", reason="needs the prometheus extra")
    t = T.monitor_cli_busy_port(tmp_path)
    assert t.stored == 1 and t.note == "alive while held: True; exit 0; retried: True", t


def test_console_serves_a_good_client_among_a_thousand_strangers() -> None:
    t = T.console_under_strangers()
    _check(t)
    assert t.seconds < 10 and _grew_mb(t) < 150 and _close_s(t) < 3, t


def test_ondemand_serves_a_good_client_among_a_thousand_strangers(tmp_path: Path) -> None:
    t = T.ondemand_under_strangers(tmp_path)
    _check(t)
    assert t.seconds < 10 and _grew_mb(t) < 150 and _close_s(t) < 3, t


@pytest.mark.slow
def test_prometheus_serves_scrapes_among_a_thousand_strangers() -> None:
    t = T.prometheus_under_strangers()
    _check(t)
    assert t.seconds < 10 and _grew_mb(t) < 150 and _close_s(t) < 3, t


def test_unix_socket_paths_that_are_not_ours_are_never_deleted(tmp_path: Path) -> None:
    t = T.unix_paths_are_not_ours(tmp_path)
    assert t.stored == 2 and "file kept: True" in t.note, t


def _close_s(t: T.Trial) -> float:
    return float(t.note.split("; ")[-2].split(" ")[1])


def _grew_mb(t: T.Trial) -> float:
    return float(t.note.rsplit("memory +", 1)[1].split(" ")[0])


@pytest.mark.slow
def test_memory_fallback_is_reported_with_count_and_place(tmp_path: Path) -> None:
    pytest.importorskip("psycopg", reason="the PostgreSQL store needs the postgres extra")
    t = T.memory_fallback(tmp_path)
    _check(t)
    assert t.lost == t.recorded and t.note.endswith("True"), t


# -- issue 28: the console and the web UI keep the recorder's promises ---------------------------
def test_a_last_record_whose_length_reads_zero_is_kept(tmp_path: Path) -> None:
    t = T.zero_length_last_record(tmp_path)
    _check(t)
    assert t.stored == t.recorded and t.lost == 0


@pytest.mark.slow
def test_the_first_report_after_a_crash_reads_every_step(tmp_path: Path) -> None:
    t = T.first_report_after_crash(tmp_path, steps=100_000)
    assert t.stored == t.recorded, t


@pytest.mark.slow
@pytest.mark.parametrize("how", ["locked", "down"])
def test_a_console_session_with_its_store_away(tmp_path: Path, how: str) -> None:
    from mlgoodput.console._api import SESSION_EXIT_S

    t = T.console_store_down(tmp_path, how, n=500)
    assert t.stored == t.recorded and t.seconds <= SESSION_EXIT_S + 0.5, t


@pytest.mark.slow
def test_an_unwritable_tensorboard_folder_at_start(tmp_path: Path) -> None:
    t = T.tensorboard_unwritable(tmp_path)
    assert "start returned" in t.note and t.stored == 1, t


def test_the_ui_under_idle_strangers() -> None:
    t = T.ui_under_strangers(idle=500)
    assert t.stored == t.recorded and "strangers: " in t.note
    assert int(t.note.rsplit(": ", 1)[1]) < 50, t  # idle connections cost no thread


def test_the_ui_serves_no_path_the_store_names_outside_its_profile_dirs(tmp_path: Path) -> None:
    t = T.ui_profile_paths(tmp_path)
    assert t.stored == t.recorded and "served: True" in t.note, t


def test_a_silent_profile_endpoint_fails_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    from mlgoodput.diagnostics import _ondemand

    monkeypatch.setattr(_ondemand, "PING_TIMEOUT_S", 0.5)  # the default, 5 s, is the bench's
    t = T.silent_profile_endpoint()
    assert "no answer to a ping" in t.note, t
