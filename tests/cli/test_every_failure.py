"""Every command, every failure, run as a user runs it (a real `python -m mlgoodput` process).

For each case: a non-zero exit code, one `mlgoodput: error:` line naming what failed, no
traceback, and no file created anywhere under the test's home, data and work folders (nor
at the store path given). Then Ctrl-C (SIGINT to the process group, as a terminal sends it),
a closed pipe and `--version`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from mlgoodput.events import EventBatch
from mlgoodput.store import open_store
from timelines import all_timelines, load
from waiting import tensorboard_has, wait_for

SRC = str(Path(__file__).parents[2] / "src")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket is closed


@dataclass
class Env:
    root: Path
    env: dict[str, str]
    good: Path  # a store holding real jobs
    pg: str  # a PostgreSQL URL on a closed port

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mlgoodput", *args],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.root / "work",
            timeout=timeout,
        )

    def files(self) -> set[Path]:
        return {p for p in self.root.rglob("*")} | ({Path("/nonexistent")} if os.path.exists("/nonexistent") else set())


@pytest.fixture(scope="module")
def cli_env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    root = tmp_path_factory.mktemp("cli")
    for d in ("home", "data", "work", "stores"):
        (root / d).mkdir()
    good = root / "stores" / "good.db"
    st = open_store(str(good))
    for i, p in enumerate(p for p in all_timelines() if p.stem in ("s1_clean_run", "s4_disruption_restart")):
        tl = load(p)
        st.append(f"goodput_{tl.job_name}", tl.job_name, EventBatch(50 + i, 0, tl.events))
    st.close()
    env = dict(
        os.environ,
        HOME=str(root / "home"),
        XDG_DATA_HOME=str(root / "data"),
        PYTHONPATH=os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
    )
    for k in ("MLGOODPUT_STORE", "MLGOODPUT_JOURNAL_DIR", "MLGOODPUT_CONSOLE", "MLGOODPUT_DEBUG"):
        env.pop(k, None)
    return Env(root, env, good, f"postgresql://nobody@127.0.0.1:{_closed_port()}/db")


MISSING = "{root}/stores/missing/dir/x.db"
GOOD = "{good}"
PG = "{pg}"

# (id, argv, expected exit code, a phrase the error line holds)
CASES: list[tuple[str, list[str], int, str]] = [
    # bad arguments
    ("report-no-job", ["report"], 2, "--job"),
    ("report-window-inf", ["report", "--job", "s1-clean-run", "--store", GOOD, "--window", "inf"], 2, "--window"),
    ("report-window-neg", ["report", "--job", "s1-clean-run", "--store", GOOD, "--window", "-5"], 2, "--window"),
    ("report-at-huge", ["report", "--job", "s1-clean-run", "--store", GOOD, "--at", "1e17"], 2, "--at"),
    ("report-at-words", ["report", "--job", "s1-clean-run", "--store", GOOD, "--at", "yesterday"], 2, "--at"),
    ("report-unknown-job", ["report", "--job", "nope", "--store", GOOD], 2, "no job named 'nope'"),
    (
        "report-unknown-logger",
        ["report", "--job", "s1-clean-run", "--logger", "x", "--store", GOOD],
        2,
        "under logger 'x'",
    ),
    (
        "report-empty-window",
        ["report", "--job", "s1-clean-run", "--store", GOOD, "--at", "1000", "--window", "60"],
        1,
        "no data in this window",
    ),
    ("store-bad-scheme", ["jobs", "--store", "ftp://host/x"], 2, "'ftp'"),
    ("store-directory", ["jobs", "--store", "{root}/stores"], 2, "is a directory"),
    ("store-dev-null", ["report", "--job", "x", "--store", "/dev/null"], 1, "/dev/null"),
    ("monitor-no-target", ["monitor", "--job", "s1-clean-run", "--store", GOOD], 2, "nothing to upload to"),
    ("monitor-interval", ["monitor", "--job", "x", "--interval", "0"], 2, "--interval"),
    (
        "monitor-otlp-not-a-url",
        ["monitor", "--job", "s1-clean-run", "--store", GOOD, "--otlp-endpoint", "not a url"],
        2,
        "HOST:PORT",
    ),
    (
        "monitor-otlp-bad-port",
        ["monitor", "--job", "s1-clean-run", "--store", GOOD, "--otlp-endpoint", "localhost:99999"],
        2,
        "HOST:PORT",
    ),
    ("console-bad-level", ["console", "logs", "--level", "LOUD", "--store", GOOD], 2, "--level"),
    ("console-unknown-job", ["console", "logs", "--job", "nope", "--store", GOOD], 2, "no console job named 'nope'"),
    ("console-bad-address", ["console", "serve", "--address", "bogus:addr:x", "--store", GOOD], 2, "port"),
    (
        "console-not-local",
        ["console", "serve", "--address", "192.0.2.1:7000", "--store", "{root}/stores/serve.db"],
        1,
        "cannot serve at",
    ),
    (
        "console-usage-no-folder",
        ["console", "usage-report", "--out", "{root}/missing/u.html", "--store", GOOD],
        2,
        "does not exist",
    ),
    (
        "console-usage-no-job",
        ["console", "usage-report", "--out", "{root}/u.html", "--store", GOOD],
        2,
        "no console jobs",
    ),
    ("runs-unknown", ["runs", "show", "nope", "--store", GOOD], 2, "no run named 'nope'"),
    ("profile-bad-duration", ["profile", "--run", "x", "--duration", "soon"], 2, "duration"),
    ("profile-no-process", ["profile", "--run", "nope", "--duration", "1s"], 2, "no process of run 'nope'"),
    ("dashboards-bad", ["dashboards", "print", "nope"], 2, "invalid choice"),
    ("dashboards-into-file", ["dashboards", "install", "/dev/null"], 2, "not a directory"),
    ("unknown-command", ["nope"], 2, "invalid choice"),
    # missing stores: a command that reads creates nothing
    ("report-missing", ["report", "--job", "x", "--store", MISSING], 1, "no store at"),
    ("jobs-missing", ["jobs", "--store", MISSING], 1, "no store at"),
    ("jobs-default-missing", ["jobs"], 1, "the default store"),
    ("runs-missing", ["runs", "--store", MISSING], 1, "no store at"),
    ("runs-show-missing", ["runs", "show", "x", "--store", MISSING], 1, "no store at"),
    ("console-logs-missing", ["console", "logs", "--store", MISSING], 1, "no store at"),
    (
        "console-usage-missing",
        ["console", "usage-report", "--out", "{root}/u.html", "--store", MISSING],
        1,
        "no store at",
    ),
    (
        "monitor-missing",
        ["monitor", "--job", "x", "--store", MISSING, "--tensorboard-dir", "{root}/tb"],
        1,
        "no folder",
    ),
    # an unreachable database
    ("advise-missing", ["advise", "--job", "x", "--store", MISSING], 1, "no store at"),
    ("advise-unknown-job", ["advise", "--job", "nope", "--store", GOOD], 2, "no job named 'nope'"),
    ("advise-pg", ["advise", "--job", "x", "--store", PG], 1, "PostgreSQL"),
    ("ui-missing", ["ui", "--store", MISSING, "--port", "0"], 2, "no store at"),
    ("fleet-missing", ["fleet", "--store", MISSING], 1, "no store at"),
    ("fleet-pg", ["fleet", "--store", PG], 1, "PostgreSQL"),
    ("fleet-bad-since", ["fleet", "--store", GOOD, "--since", "last week"], 2, "--since"),
    ("fleet-until-first", ["fleet", "--store", GOOD, "--since", "2000", "--until", "1000"], 2, "--until must be after"),
    ("fleet-bad-price", ["fleet", "--store", GOOD, "--price-per-hour", "-1"], 2, "--price-per-hour"),
    ("fleet-no-prices", ["fleet", "--store", GOOD, "--prices", "{root}/nope.toml"], 2, "cannot read"),
    ("fleet-empty-by", ["fleet", "--store", GOOD, "--by", " "], 2, "--by"),
    ("ui-pg", ["ui", "--store", PG, "--port", "0"], 1, "PostgreSQL"),
    ("ui-bad-port", ["ui", "--store", GOOD, "--port", "70000"], 2, "--port"),
    ("report-pg", ["report", "--job", "x", "--store", PG], 1, "PostgreSQL"),
    ("jobs-pg", ["jobs", "--store", PG], 1, "PostgreSQL"),
    ("runs-pg", ["runs", "--store", PG], 1, "PostgreSQL"),
    ("runs-show-pg", ["runs", "show", "x", "--store", PG], 1, "PostgreSQL"),
    ("console-logs-pg", ["console", "logs", "--store", PG], 1, "PostgreSQL"),
    ("console-usage-pg", ["console", "usage-report", "--out", "{root}/u.html", "--store", PG], 1, "PostgreSQL"),
    ("monitor-pg", ["monitor", "--job", "x", "--store", PG, "--tensorboard-dir", "{root}/tb"], 1, "PostgreSQL"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("argv", "code", "phrase"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_failure_is_one_line_nonzero_no_traceback_no_file(
    cli_env: Env, argv: list[str], code: int, phrase: str
) -> None:
    args = [a.format(root=cli_env.root, good=cli_env.good, pg=cli_env.pg) for a in argv]
    before = cli_env.files()
    res = cli_env.run(*args)
    assert res.returncode == code, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("mlgoodput: error:") and phrase in last, res.stderr
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("mlgoodput: error:")]
    assert len(errors) == 1, res.stderr
    assert cli_env.files() == before, sorted(map(str, cli_env.files() - before))


@pytest.mark.slow
def test_debug_shows_the_traceback(cli_env: Env) -> None:
    res = cli_env.run("report", "--job", "x", "--store", cli_env.pg, "--debug")
    assert res.returncode == 1 and "Traceback" in res.stderr and "mlgoodput: error:" in res.stderr


def test_version(cli_env: Env) -> None:
    from mlgoodput import __version__

    res = cli_env.run("--version")
    assert res.returncode == 0 and res.stdout.strip() == f"mlgoodput {__version__}"


@pytest.mark.parametrize(
    "argv", [["report", "--job", "s4-disruption-restart"], ["jobs"], ["dashboards", "print", "grafana"]]
)
def test_closed_pipe_exits_cleanly(cli_env: Env, argv: list[str]) -> None:
    """`mlgoodput report | head -1`: the reader leaves early; we exit 0 and say nothing."""
    env = dict(cli_env.env, MLGOODPUT_STORE=str(cli_env.good))
    cmd = " ".join([sys.executable, "-m", "mlgoodput", *argv]) + ' | head -1; echo "rc=${PIPESTATUS[0]}" >&2'
    res = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, timeout=60)
    assert res.stdout.count("\n") == 1
    assert res.stderr.strip() == "rc=0", res.stderr


def _ctrl_c(cli_env: Env, argv: list[str], ready: str, also: Callable[[], bool] | None = None) -> tuple[int, str]:
    """Start `argv` in a process group of its own, wait for `ready` in its output (and `also`),
    then send SIGINT to the whole group (as a terminal's Ctrl-C does)."""
    out = cli_env.root / "work" / "ctrl-c.out"
    with open(out, "w") as f:
        p = subprocess.Popen(
            [sys.executable, "-m", "mlgoodput", *argv],
            stdout=f,
            stderr=subprocess.STDOUT,
            env=cli_env.env,
            cwd=cli_env.root / "work",
            start_new_session=True,
        )
    try:
        assert wait_for(lambda: ready in out.read_text() and (also is None or also()), 180), out.read_text()
        os.killpg(p.pid, signal.SIGINT)
        p.wait(60)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    text = out.read_text()
    out.unlink()
    return p.returncode, text


@pytest.mark.slow
def test_ctrl_c_on_console_serve(cli_env: Env, tmp_path: Path) -> None:
    code, text = _ctrl_c(
        cli_env,
        [
            "console",
            "serve",
            "--address",
            f"unix:{tmp_path}/c.sock",
            "--store",
            str(tmp_path / "c.db"),
            "--job",
            "ctrl-c",
        ],
        "MLGOODPUT_CONSOLE=",
    )
    assert code == 0 and "Traceback" not in text, text


@pytest.mark.slow
def test_ctrl_c_on_monitor_keeps_the_final_upload(cli_env: Env, tmp_path: Path) -> None:
    tb = tmp_path / "tb"
    code, text = _ctrl_c(
        cli_env,
        [
            "monitor",
            "--job",
            "s4-disruption-restart",
            "--store",
            str(cli_env.good),
            "--interval",
            "0.5",
            "--tensorboard-dir",
            str(tb),
        ],
        "goodput",
        # the first upload landed: before it, the exporter process may still be
        # importing its writer (seconds under load), longer than the final upload's 10 s
        lambda: tensorboard_has(tb / "goodput", "goodput/goodput_pct"),
    )
    assert code == 0 and "Traceback" not in text, text
    assert "stopped" in text and "incomplete" not in text, text


@pytest.mark.slow
def test_ctrl_c_on_logs_follow(cli_env: Env, tmp_path: Path) -> None:
    import logging

    from mlgoodput.console import ConsoleServer, connect, disconnect

    store = str(tmp_path / "f.db")
    srv = ConsoleServer(f"unix:{tmp_path}/f.sock", job="follow", store=store, display=False)
    address = srv.start()
    try:
        connect(address)
        logging.getLogger("follow").warning("hello from the client")
        assert disconnect(10)
    finally:
        srv.stop()
    code, text = _ctrl_c(cli_env, ["console", "logs", "--follow", "--store", store], "hello from the client")
    assert code == 0 and "Traceback" not in text, text


KILLED = """
import os, signal, sys, threading
import mlgoodput.store
from mlgoodput.goodput import GoodputRecorder
# the shipper never gets an event into the store before the kill (its first round can start at
# once and race the kill): only the journal has them
mlgoodput.store.SQLiteStore.append = lambda *a, **k: threading.Event().wait()
rec = GoodputRecorder(sys.argv[2], "goodput_" + sys.argv[2], True, store=sys.argv[1])
rec.record_job_start_time()
for i in range(5):
    rec.record_step_start_time(i)
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.slow
@pytest.mark.parametrize("command", ["report", "jobs"])
def test_a_job_killed_before_its_first_shipment_is_found(cli_env: Env, tmp_path: Path, command: str) -> None:
    store = str(tmp_path / "k.db")
    res = subprocess.run([sys.executable, "-c", KILLED, store, "killed-early"], env=cli_env.env, timeout=60)
    assert res.returncode == -signal.SIGKILL
    assert any(p.is_file() for p in Path(store + ".mlgoodput-journals").rglob("*"))  # only the journal has them
    args = ["report", "--job", "killed-early", "--json"] if command == "report" else ["jobs", "--json"]
    out = cli_env.run(*args, "--store", store)
    assert out.returncode == 0, out.stderr
    if command == "report":
        import json

        assert json.loads(out.stdout)["last_step"] == 4
    else:
        assert "killed-early" in out.stdout


@pytest.mark.slow
def test_a_second_monitor_on_one_tensorboard_folder_is_one_clear_line(cli_env: Env, tmp_path: Path) -> None:
    from mlgoodput.export import TensorBoardExporter

    first = TensorBoardExporter(tmp_path / "tb" / "goodput", exclusive=True)  # a monitor already writes there
    first.start()
    try:
        res = cli_env.run(
            "monitor",
            "--job",
            "s1-clean-run",
            "--store",
            str(cli_env.good),
            "--tensorboard-dir",
            str(tmp_path / "tb"),
            "--quiet",
        )
    finally:
        first.shutdown()
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "another mlgoodput process" in res.stderr.strip().splitlines()[-1]
    assert len(list((tmp_path / "tb" / "goodput").glob("events.out.tfevents.*"))) == 0
