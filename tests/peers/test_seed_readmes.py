"""The README code of google-cloud-mldiagnostics and jax-monitoring runs on mlgoodput with only
the import lines changed.

The blocks come from the installed packages' own READMEs (their PyPI descriptions, so the
test needs no copy of them); the seed READMEs' blocks are among them. A block that is
complete code runs as it is; a fragment runs after a prelude that defines the names it
assumes (an active run, `num_steps`, `train_model`, ...), with its placeholders (`# ...`,
`...`) filled in. Blocks that need Google Cloud credentials, a JAX cluster, or are not
Python are listed with the reason. A README block this test does not know fails it, so a
new upstream example is looked at. Warnings of ours (misuse) are errors here: README code
must not trigger them.
"""

from __future__ import annotations

import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("jax", reason="the README blocks profile JAX code: pip install 'mlgoodput[jax]'")

RUNNER = Path(__file__).with_name("readme_runner.py")
SRC = str(Path(__file__).resolve().parents[2] / "src")

IMPORTS = (
    ("from google_cloud_mldiagnostics import", "from mlgoodput.diagnostics import"),
    ("import jax_monitoring as jm", "import mlgoodput.jax as jm"),
)

# What a fragment assumes was defined before it.
RUN = """
from mlgoodput.diagnostics import machinelearning_run, metrics, metric_types, xprof
run = machinelearning_run(name="readme", gcs_path="memory://readme-bucket/profiles")
"""
STEP_VALUES = """
num_steps = 30
step_size, loss, gradient, total_weights = 0.001, 0.5, 1.25, 1.0e6
step_time, throughput, latency, tflops, mfu = 0.2, 5000.0, 0.01, 120.0, 0.42
step = 29
"""
TRAIN = """
import jax.numpy as jnp
def train_model():
    x = jnp.ones((32, 32))
    return (x @ x).block_until_ready()
evaluate_model = train_model
"""
IMPORT_RUN = "import os\nfrom mlgoodput.diagnostics import machinelearning_run\n"

# (a distinctive line of the block, or "=" and the whole block; what to do): "run", ("prelude", text, {placeholder: filler}),
# or ("skip", reason).
PLAN: list[tuple[str, object]] = [
    (
        "logging_client.setup_logging()\n\n    # Now, standard",
        ("skip", "needs Google Cloud credentials: google.cloud.logging.Client()"),
    ),
    (
        "logging.getLogger().setLevel(logging.DEBUG) # Enable DEBUG",
        ("skip", "needs Google Cloud credentials: google.cloud.logging.Client()"),
    ),
    (
        "# 1. Set up Cloud Logging",
        (
            "skip",
            "needs Google Cloud credentials: google.cloud.logging.Client() (the run, metric and xprof calls it makes run in the blocks below)",
        ),
    ),
    (
        '"mode": ["otel", "cloud_logging"]',
        ("prelude", IMPORT_RUN, {"# ... other parameters ...": 'name="<run_name>",'}),
    ),
    ('environment=os.environ.get("ENV", "env")', ("prelude", IMPORT_RUN, {"    # ...\n": '    name="<run_name>",\n'})),
    (
        "yaml_data = yaml.safe_load(yaml_file)",
        ("prelude", IMPORT_RUN + "open('config.yaml', 'w').write('epochs: 100\\nbatch_size: 32\\n')\n", {}),
    ),
    ("=metrics.record(metric_types.MetricType.LOSS, 0.123, step=1)", ("prelude", RUN, {})),
    ("for step in range(num_steps):", ("prelude", RUN + STEP_VALUES, {})),
    ('metrics.record("custom_metrics_1", step_size, step=step + 1)', ("prelude", RUN + STEP_VALUES, {})),
    ('{"custom_metrics_1", "value":<value>}', ("skip", "not valid Python: `<value>` placeholders in set literals")),
    ("# Also supports collection via decorators", ("prelude", RUN + TRAIN, {})),
    ("# starts profiling on all nodes", ("prelude", RUN + TRAIN, {})),
    ('prof.start(session_id="profiling_session")', ("prelude", RUN, {})),
    ("prof = xprof(process_index_list=[0,2])", ("prelude", RUN, {})),
    (
        "# Initialize JAX distributed using the environment variables",
        ("skip", "needs a multi-host JAX cluster (jax.distributed.initialize)"),
    ),
    (
        "# 1. Determine process ID from Kubernetes JobSet completion index",
        ("skip", "needs a multi-host JAX cluster on Kubernetes"),
    ),
    ("# specify where profiling data will be stored", ("prelude", IMPORT_RUN, {"    ...\n": ""})),
    ("source venv/bin/activate", ("skip", "a shell command, not Python")),
    ('jm.init(\n        job_name="my-training-job",', ("run", None)),
]


def _blocks(distribution: str) -> list[str]:
    meta = importlib.metadata.metadata(distribution)
    text = meta.get_payload() or meta.get("Description") or ""  # type: ignore[attr-defined]
    return [b for b in re.findall(r"```python\n(.*?)```", text, re.S)]


def _plan(block: str) -> object:
    matches = [what for key, what in PLAN if (block.strip() == key[1:] if key.startswith("=") else key in block)]
    assert len(matches) == 1, f"a README block this test does not know (or knows twice):\n{block}"
    return matches[0]


def _program(distribution: str) -> tuple[list[tuple[str, str]], list[str]]:
    runnable: list[tuple[str, str]] = []
    skipped: list[str] = []
    for i, block in enumerate(_blocks(distribution)):
        label = f"{distribution}#{i}"
        what = _plan(block)
        assert isinstance(what, tuple)
        if what[0] == "skip":
            skipped.append(f"{label}: {what[1]}")
            continue
        code = block
        for old, new in IMPORTS:
            code = code.replace(old, new)
        if what[0] == "prelude":
            _, prelude, fillers = what
            for old, new in fillers.items():
                assert old in code, (label, old)
                code = code.replace(old, new)
            code = prelude + code
        runnable.append((label, code))
    return runnable, skipped


def _run(tmp_path: Path, blocks: list[tuple[str, str]]) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps(blocks))
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONPATH": SRC,
        "MLGOODPUT_STORE": str(tmp_path / "store.db"),
        "MLGOODPUT_JOURNAL_DIR": str(tmp_path / "journal"),
        "MLGOODPUT_RUNTIME_DIR": str(tmp_path / "rt"),
        "MLGOODPUT_PROFILE_DIR": str(tmp_path / "profiles"),
        "XDG_DATA_HOME": str(tmp_path / "xdg"),
        "JAX_PLATFORMS": "cpu",
    }
    return subprocess.run(
        [sys.executable, "-W", "error::mlgoodput._misuse.MlGoodputWarning", str(RUNNER), str(spec)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.mark.slow
def test_mldiagnostics_readme_blocks_run(tmp_path: Path) -> None:
    blocks, skipped = _program("google-cloud-mldiagnostics")
    assert len(blocks) >= 10 and len(skipped) <= 8, skipped
    done = _run(tmp_path, blocks)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("ok ") == len(blocks)
    from mlgoodput.diagnostics import list_runs, load_run

    store = str(tmp_path / "store.db")
    names = [r["name"] for r in list_runs(store)]
    assert any(n.startswith("run_name-") for n in names)  # "<run_name>" made safe
    readme = [load_run(n, store) for n in names if n.startswith("readme-")]
    by_metric = {m for r in readme for m in r.metrics}
    assert {"loss", "learning_rate", "mfu", "custom_metrics_1"} <= by_metric
    loops = [r for r in readme if "learning_rate" in r.metrics]
    assert [p[0] for p in loops[0].metrics["learning_rate"]] == [10, 20, 30]  # the loop's steps
    sessions = [p for r in readme for p in r.profiles]
    assert any(p["session"] == "profiling_session" for p in sessions)
    assert all(p["complete"] for p in sessions) and len(sessions) >= 5
    configs = [load_run(n, store).configs for n in names if n.startswith("run_name-")]
    assert {"epochs": 100, "batch_size": 32} in configs  # the YAML block's configs


@pytest.mark.slow
def test_jax_monitoring_readme_block_runs(tmp_path: Path) -> None:
    blocks, skipped = _program("jax-monitoring")
    assert len(blocks) == 1 and not skipped
    done = _run(tmp_path, blocks)
    assert done.returncode == 0, done.stdout + done.stderr
    from mlgoodput.store import open_store

    jobs = [j for j in open_store(str(tmp_path / "store.db")).jobs() if j.namespace == "mlgoodput.jax"]
    assert [j.job for j in jobs] == ["my-training-job"]  # the aggregates reached the store
