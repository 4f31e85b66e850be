"""FLOPs per step (JAX compiler, PyTorch counter, analytic) and peak FLOP/s detection."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest

from mlgoodput import MlGoodputWarning, flops, goodput
from mlgoodput.accounting import GoodputCalculator
from mlgoodput.events import Kind
from mlgoodput.store import open_store

SIZES = [64, 1024, 1024, 1024, 64]
BATCH = 512


def _jax_mlp() -> tuple[object, object, object, object]:
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    def init(key: object) -> list[tuple[object, object]]:
        ps = []
        for a, b in itertools.pairwise(SIZES):
            key, k1 = jax.random.split(key)
            ps.append((jax.random.normal(k1, (a, b)) * 0.01, jnp.zeros(b)))
        return ps

    def loss(ps: list[tuple[object, object]], x: object, y: object) -> object:
        h = x
        for i, (w, b) in enumerate(ps):
            h = h @ w + b
            if i < len(ps) - 1:
                h = jax.nn.relu(h)
        return jnp.mean((h - y) ** 2)

    @jax.jit
    def train_step(ps: list[tuple[object, object]], x: object, y: object) -> object:
        grads = jax.grad(loss)(ps, x, y)
        return [(w - 0.01 * gw, b - 0.01 * gb) for (w, b), (gw, gb) in zip(ps, grads, strict=True)]

    x = jnp.ones((BATCH, SIZES[0]))
    y = jnp.ones((BATCH, SIZES[-1]))
    return train_step, loss, init(jax.random.PRNGKey(0)), (x, y)


@pytest.mark.slow
def test_jax_cost_analysis_of_a_real_train_step_agrees_with_6_n_tokens() -> None:
    train_step, loss, ps, (x, y) = _jax_mlp()
    n = flops.dense_params(SIZES)
    analytic = flops.transformer_flops(n, BATCH)  # no attention: 6 x N x tokens
    assert analytic == 6 * n * BATCH
    measured = flops.jax_step_flops(train_step, ps, x, y)
    assert measured is not None
    assert measured == pytest.approx(analytic, rel=0.05)
    # forward only is 2 x N x tokens, to within the elementwise ops
    fwd = flops.jax_step_flops(loss, ps, x, y)  # a plain function is jitted by the helper
    assert fwd == pytest.approx(flops.transformer_flops(n, BATCH, training=False), rel=0.01)


def test_torch_flop_counter_matches_the_analytic_count() -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install 'mlgoodput[torch]')")
    layers: list[object] = []
    for i, (a, b) in enumerate(itertools.pairwise(SIZES)):
        layers.append(torch.nn.Linear(a, b))
        if i < len(SIZES) - 2:
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    x = torch.ones(BATCH, SIZES[0])

    def step() -> None:
        model(x).square().mean().backward()

    counted = flops.torch_step_flops(step)
    n_weights = flops.dense_params(SIZES, bias=False)
    # PyTorch counts the matmuls: forward 2 N B, backward 4 N B less the first layer's input gradient
    assert counted == pytest.approx(6 * n_weights * BATCH - 2 * SIZES[0] * SIZES[1] * BATCH, rel=1e-9)
    assert counted == pytest.approx(flops.transformer_flops(flops.dense_params(SIZES), BATCH), rel=0.05)


def test_transformer_attention_term() -> None:
    n, tokens, layers, seq, d = 1e9, 2048.0, 24, 2048, 2048
    base = flops.transformer_flops(n, tokens)
    full = flops.transformer_flops(n, tokens, n_layers=layers, seq_len=seq, d_model=d)
    assert full - base == pytest.approx(3 * 4 * layers * seq * d * tokens)
    causal = flops.transformer_flops(n, tokens, n_layers=layers, seq_len=seq, d_model=d, causal=True)
    assert causal - base == pytest.approx((full - base) / 2)
    with pytest.raises(ValueError, match="n_params"):
        flops.transformer_flops(-1, 1)


def test_peak_table_detection_and_override(monkeypatch: pytest.MonkeyPatch) -> None:
    assert flops.detect_peak(["TPU v5 lite"] * 4) == (4 * 197e12, "table:TPU v5e x4 bf16")
    h100 = flops.detect_peak(["NVIDIA H100 80GB HBM3"], "float8_e4m3fn")
    assert h100 is not None and h100[0] == pytest.approx(1978.9e12)
    assert flops.detect_peak(["NVIDIA H100 PCIe"])[0] == pytest.approx(756.5e12)  # type: ignore[index]
    assert flops.detect_peak(["Some Future Chip"]) is None
    assert flops.detect_peak(["TPU v4"], "fp8") is None  # no such dense rate
    monkeypatch.delenv(flops.CPU_PEAK_FLOPS, raising=False)
    assert flops.detect_peak(["cpu"], cpu_peak_flops_per_s=5e10) == (5e10, "configured")
    monkeypatch.setenv(flops.CPU_PEAK_FLOPS, "2e11")
    assert flops.detect_peak(["cpu", "cpu"]) == (2e11, "configured")
    monkeypatch.setenv(flops.CPU_PEAK_FLOPS, "fast")
    with pytest.raises(ValueError, match="MLGOODPUT_CPU_PEAK_FLOPS"):
        flops.detect_peak(["cpu"])
    monkeypatch.delenv(flops.CPU_PEAK_FLOPS)
    measured = flops.detect_peak(["cpu"])
    assert measured is not None and measured[1] == "measured" and measured[0] > 1e6
    assert flops.detect_peak(["cpu"], measure=False) is None


@pytest.mark.slow
def test_recorder_methods_feed_the_report(caplog: pytest.LogCaptureFixture) -> None:
    url = "memory://flops-rec"
    rec = goodput.GoodputRecorder("fj", "goodput_fj", True, store=url, process_index=0)
    rec.record_job_submit_time(1_000.0)
    rec.record_job_start_time()
    train_step, _, ps, (x, y) = _jax_mlp()
    v = flops.record_jax_step_flops(rec, train_step, ps, x, y)
    assert flops.record_peak(rec, cpu_peak_flops_per_s=1e11) == (1e11, "configured")
    # a value that cannot be recorded warns once and records nothing (never into training)
    with pytest.warns(MlGoodputWarning, match="flops"):
        rec.record_step_flops("many")  # type: ignore[arg-type]
    with pytest.warns(MlGoodputWarning, match="flops_per_s"):
        rec.record_peak_flops(-1.0)
    with pytest.warns(MlGoodputWarning, match="submit_time"):
        rec.record_job_submit_time("yesterday")  # type: ignore[arg-type]
    for i in range(3):
        rec.record_step_start_time(i)
    rec.record_job_end_time()
    rec.close()
    with pytest.warns(MlGoodputWarning, match="closed") as said:
        rec.record_step_flops(1.0)  # after close: warns once, never raises
        rec.record_step_flops(1.0)
    assert sum("closed" in str(w.message) for w in said) == 1
    st = open_store(url)
    events = list(st.read("goodput_fj", "fj").columns.events())
    by = {e.kind: e for e in events}
    assert by[Kind.STEP_FLOPS].value == v
    assert (by[Kind.PEAK_FLOPS].value, by[Kind.PEAK_FLOPS].name) == (1e11, "configured")
    assert (by[Kind.JOB_SUBMIT].value, by[Kind.JOB_SUBMIT].name) == (1_000.0, "recorded")
    p = GoodputCalculator("fj", "goodput_fj", store=st).report().productivity
    assert p is not None and p.peak_source == "configured" and p.flops_per_step == v
    assert p.queue_s is not None and p.queue_s > 0


@pytest.mark.slow
def test_submit_time_from_the_environment(tmp_path: object) -> None:
    code = (
        "import logging, sys\n"
        "from mlgoodput import goodput\n"
        "from mlgoodput.store import open_store\n"
        "r = goodput.GoodputRecorder('sj', 'g', True, store='memory://sj', process_index=0)\n"
        "r.record_job_submit_time()\n"
        "r.close()\n"
        "e = [x for x in open_store('memory://sj').read('g', 'sj').columns.events()]\n"
        "print(e[0].value if e else None, e[0].name if e else None)\n"
    )
    env = dict(os.environ, MLGOODPUT_JOB_SUBMIT_TIME="2026-01-01T00:00:00Z", KUBERNETES_SERVICE_HOST="10.0.0.1")
    env.pop("SLURM_JOB_ID", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.split() == ["1767225600.0", "kubernetes"], out.stderr
    env = {k: v for k, v in env.items() if k not in ("MLGOODPUT_JOB_SUBMIT_TIME", "KUBERNETES_SERVICE_HOST")}
    env["SLURM_JOB_SUBMIT_TIME"] = "1767225000"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.split() == ["1767225000.0", "slurm"], out.stderr
    env.pop("SLURM_JOB_SUBMIT_TIME")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert out.stdout.split() == ["None", "None"] and "no submit time found" in out.stderr


def test_slurm_scontrol_output_is_parsed() -> None:
    from mlgoodput._submit import from_slurm, slurm_field

    line = "JobId=7 JobName=train SubmitTime=2026-01-01T00:00:00 EligibleTime=2026-01-01T00:00:00 StartTime=None"
    assert slurm_field(line, "StartTime") is None
    t = slurm_field(line, "SubmitTime")
    assert t is not None
    assert from_slurm({"SLURM_JOB_ID": "7"}, submit_of=lambda job: t if job == "7" else None) == (t, "slurm")
    assert from_slurm({}, submit_of=lambda job: 1.0) is None


def test_pod_creation_time_from_a_kubernetes_api_server(tmp_path: object) -> None:
    """A local stand-in for the API server (plain HTTP on loopback) answers the pod read."""
    import http.server
    import json
    import threading
    from pathlib import Path

    from mlgoodput._submit import from_kubernetes, pod_creation_time

    seen: list[tuple[str, str | None]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append((self.path, self.headers.get("Authorization")))
            if self.path == "/api/v1/namespaces/train/pods/worker-0":
                body = json.dumps({"metadata": {"name": "worker-0", "creationTimestamp": "2026-01-01T00:00:00Z"}})
                self.send_response(200)
            else:
                body = json.dumps({"kind": "Status", "code": 403})
                self.send_response(403)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    sa = Path(str(tmp_path)) / "sa"
    sa.mkdir()
    (sa / "token").write_text("tok-123\n")
    (sa / "namespace").write_text("train")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "worker-0"}
        assert from_kubernetes(env, api_url=url, service_account_dir=str(sa)) == (1767225600.0, "kubernetes")
        assert seen[-1] == ("/api/v1/namespaces/train/pods/worker-0", "Bearer tok-123")
        # forbidden (another pod name), no service account, no pod name: None, never an error
        assert pod_creation_time({"HOSTNAME": "other"}, api_url=url, service_account_dir=str(sa)) is None
        assert pod_creation_time(env, api_url=url, service_account_dir=str(sa / "missing")) is None
        assert (
            pod_creation_time({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, api_url=url, service_account_dir=str(sa)) is None
        )
    finally:
        server.shutdown()
        server.server_close()
        t.join(timeout=10)
