"""A job's labels and size for the fleet view: given, from $MLGOODPUT_LABELS and from the
scheduler's variables; recorded as a JOB_LABELS event at each job start; bad ones fail at the
constructor (naming the argument), a bad later call warns and records nothing."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from mlgoodput import MlGoodputWarning, goodput
from mlgoodput._labels import detect_accelerators, job_labels, parse_labels, scheduler_labels
from mlgoodput.events import Kind
from tests.recorder.test_recorder import read

T0 = dt.datetime(2026, 1, 5, 12, 0, tzinfo=dt.UTC)


def _labels_events(url: str, job: str) -> list[tuple[float, dict[str, str], float | None, str | None]]:
    out = []
    for e in read(url, job):
        if e.kind is Kind.JOB_LABELS:
            assert e.attrs is not None
            out.append((e.time, dict(e.attrs["labels"]), e.value, e.name))
    return out


def test_labels_and_size_are_recorded_at_each_job_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLGOODPUT_LABELS", "team=nlp, model=llama-8b,cluster=a")
    monkeypatch.setenv("SLURM_JOB_ACCOUNT", "research")
    monkeypatch.setenv("SLURM_JOB_PARTITION", "gpu")
    url = "memory://labels-1"
    with goodput.GoodputRecorder(
        "lj", "goodput_lj", True, store=url, labels={"cluster": "b"}, accelerators=16, accelerator_type="H100"
    ) as r:
        assert r.labels == {
            "slurm_account": "research",
            "slurm_partition": "gpu",
            "team": "nlp",
            "model": "llama-8b",
            "cluster": "b",  # the argument wins over the variable
        }
        r.record_job_start_time(T0)
        r.record_job_end_time(T0 + dt.timedelta(seconds=5))
        r.record_job_start_time(T0 + dt.timedelta(seconds=9))
        r.record_job_labels({"stage": "sft"}, accelerators=32)
        assert r.flush(30)
    got = _labels_events(url, "lj")
    assert [t for t, *_ in got[:2]] == [T0.timestamp(), T0.timestamp() + 9]  # beside each job start
    assert all(v == 16.0 and n == "H100" for _, _, v, n in got[:2])
    assert got[0][1]["cluster"] == "b" and got[0][1]["slurm_account"] == "research"
    assert got[2][1]["stage"] == "sft" and got[2][2] == 32.0 and got[2][3] == "H100"


def test_nothing_is_recorded_when_nothing_is_known(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("MLGOODPUT_LABELS", "MLGOODPUT_ACCELERATORS", "MLGOODPUT_ACCELERATOR_TYPE", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(var, raising=False)
    for var in ("SLURM_JOB_ACCOUNT", "SLURM_JOB_PARTITION", "SLURM_CLUSTER_NAME", "POD_NAMESPACE", "JOBSET_NAME"):
        monkeypatch.delenv(var, raising=False)
    url = "memory://labels-none"
    with goodput.GoodputRecorder("ln", "goodput_ln", True, store=url) as r:
        r.record_job_start_time(T0)
        assert r.flush(30)
    assert _labels_events(url, "ln") == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"labels": {"9team": "x"}}, "label key '9team'"),
        ({"labels": {"team": ""}}, r"labels\['team'\] must be 1 to"),
        ({"labels": {"team": ["x"]}}, r"labels\['team'\] must be a string"),
        ({"labels": 5}, "labels must be a mapping"),
        ({"labels": "team"}, "expected key=value items"),
        ({"accelerators": 0}, "accelerators must be a positive whole number, got 0"),
        ({"accelerators": 2.5}, "accelerators must be a positive whole number, got 2.5"),
        ({"accelerator_type": ""}, "accelerator_type"),
    ],
)
def test_bad_arguments_fail_at_the_constructor(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises((TypeError, ValueError), match=match):
        goodput.GoodputRecorder("bad", "goodput_bad", True, store="memory://labels-bad", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("var", "value", "match"),
    [
        ("MLGOODPUT_LABELS", "team", r"\$MLGOODPUT_LABELS: expected key=value"),
        ("MLGOODPUT_ACCELERATORS", "many", r"\$MLGOODPUT_ACCELERATORS must be a positive whole number, got 'many'"),
    ],
)
def test_a_bad_variable_fails_at_the_constructor(
    monkeypatch: pytest.MonkeyPatch, var: str, value: str, match: str
) -> None:
    monkeypatch.setenv(var, value)
    with pytest.raises(ValueError, match=match):
        goodput.GoodputRecorder("bad", "goodput_bad", True, store="memory://labels-bad2")


def test_a_bad_later_call_warns_and_records_nothing() -> None:
    url = "memory://labels-warn"
    with goodput.GoodputRecorder("lw", "goodput_lw", True, store=url, labels="team=a") as r:
        r.record_job_start_time(T0)
        with pytest.warns(MlGoodputWarning, match="record_job_labels"):
            r.record_job_labels({"bad key": "x"})
        r.record_job_labels(accelerators=-1)  # warned once per kind: no second warning, nothing raised
        assert r.flush(30)
        assert r.misuse_counts.get("bad_labels") == 2
    assert len(_labels_events(url, "lw")) == 1


def test_scheduler_labels_and_the_pod_namespace_file(tmp_path: Path) -> None:
    ns = tmp_path / "namespace"
    ns.write_text("ml-team\n")
    env = {"KUBERNETES_SERVICE_HOST": "10.0.0.1", "JOBSET_NAME": "llama-run", "SLURM_CLUSTER_NAME": "c1"}
    assert scheduler_labels(env, str(ns)) == {"jobset": "llama-run", "slurm_cluster": "c1", "k8s_namespace": "ml-team"}
    assert scheduler_labels({"POD_NAMESPACE": "explicit", "KUBERNETES_SERVICE_HOST": "x"}, str(ns)) == {
        "k8s_namespace": "explicit"
    }
    assert scheduler_labels({}, str(ns)) == {}  # not on Kubernetes: the file is not read
    assert job_labels({"team": "z"}, {"MLGOODPUT_LABELS": "team=y,model=m"}) == {"team": "z", "model": "m"}
    assert parse_labels(" a=1 ,, b = two ") == {"a": "1", "b": "two"}


def test_accelerators_from_the_environment() -> None:
    assert detect_accelerators({"MLGOODPUT_ACCELERATORS": "64", "MLGOODPUT_ACCELERATOR_TYPE": "TPU v5p"}) == (
        64,
        "TPU v5p",
    )
    got = detect_accelerators({})
    assert got[0] is None or got[0] > 0  # CPU-only here: JAX on CPU and torch without CUDA say nothing


def test_labels_reach_the_fleet(tmp_path: Path) -> None:
    from mlgoodput.accounting import FleetSource

    db = str(tmp_path / "f.db")
    with goodput.GoodputRecorder("fj", "goodput_fj", True, store=db, labels={"team": "rl"}, accelerators=4) as r:
        r.record_job_start_time(T0)
        r.record_step_start_time(0, T0 + dt.timedelta(seconds=1))
        r.record_step_start_time(1, T0 + dt.timedelta(seconds=3))
        r.record_job_end_time(T0 + dt.timedelta(seconds=5))
        assert r.flush(30)
    from mlgoodput.store import open_store

    st = open_store(db)
    try:
        rep = FleetSource(st).report(T0.timestamp() - 10, T0.timestamp() + 10, "team").to_dict()
    finally:
        st.close()
    assert [g["key"] for g in rep["groups"]] == ["rl"]
    assert rep["groups"][0]["accelerator_hours"] == 5 * 4 / 3600.0
    assert json.dumps(rep)  # JSON-ready


def test_an_idle_runtime_is_never_started_to_count_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    """A JAX whose backends are not initialized yet (before jax.distributed.initialize) and a
    torch whose CUDA is not initialized are not asked: asking would start them."""
    import sys
    import types

    asked: list[str] = []
    ready = [False]

    class Dev:
        device_kind = "TPU v5 lite"

    fake_jax = types.ModuleType("jax")
    fake_jax.default_backend = lambda: asked.append("backend") or "tpu"  # type: ignore[attr-defined]
    fake_jax.devices = lambda: asked.append("devices") or [Dev()] * 8  # type: ignore[attr-defined]
    xb = types.ModuleType("jax._src.xla_bridge")
    xb.backends_are_initialized = lambda: ready[0]  # type: ignore[attr-defined]
    fake_torch = types.ModuleType("torch")
    fake_torch.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        is_initialized=lambda: False, device_count=lambda: asked.append("cuda") or 4
    )
    monkeypatch.setitem(sys.modules, "jax", fake_jax)
    monkeypatch.setitem(sys.modules, "jax._src.xla_bridge", xb)
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    assert detect_accelerators({}) == (None, None)
    assert asked == []
    ready[0] = True
    assert detect_accelerators({}) == (8, "TPU v5 lite")


def test_a_size_unknown_at_the_start_is_asked_at_the_first_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """JAX is usually started after record_job_start_time: the first step start asks again, once."""
    monkeypatch.delenv("MLGOODPUT_ACCELERATORS", raising=False)
    url = "memory://labels-first-step"
    size: list[tuple[int | None, str | None]] = [(None, None)]
    monkeypatch.setattr("mlgoodput._recorder.detect_accelerators", lambda: size[0])
    with goodput.GoodputRecorder("fs", "goodput_fs", True, store=url, labels={"team": "a"}) as r:
        r.record_job_start_time(T0)
        size[0] = (16, "H100")  # the job started its runtime
        r.record_step_start_time(0, T0 + dt.timedelta(seconds=1))
        assert "record_step_start_time" not in vars(r)  # the plain method again
        r.record_step_start_time(1, T0 + dt.timedelta(seconds=2))
        assert r.flush(30)
    got = _labels_events(url, "fs")
    assert [(v, n) for _, _, v, n in got] == [(None, None), (16.0, "H100")]
    steps = [e.step for e in read(url, "fs") if e.kind is Kind.STEP_START]
    assert steps == [0, 1]


@pytest.mark.parametrize(
    ("env", "local", "want"),
    [
        ({"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}, 8, 16),  # every rank sees its node's 8
        ({"WORLD_SIZE": "16", "LOCAL_WORLD_SIZE": "8"}, 1, 16),  # one device a rank
        ({"WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "1"}, 8, 16),  # one process a node drives 8
        ({"SLURM_NTASKS": "16", "SLURM_JOB_NUM_NODES": "2"}, 1, 16),  # srun --gpus-per-task=1
        ({}, 4, 4),
    ],
)
def test_torch_counts_the_whole_job(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], local: int, want: int
) -> None:
    import sys
    import types

    fake = types.ModuleType("torch")
    fake.cuda = types.SimpleNamespace(  # type: ignore[attr-defined]
        is_initialized=lambda: True, device_count=lambda: local, get_device_name=lambda i: "NVIDIA H100"
    )
    monkeypatch.setitem(sys.modules, "torch", fake)
    monkeypatch.delitem(sys.modules, "jax", raising=False)
    assert detect_accelerators(env) == (want, "NVIDIA H100")


def test_too_many_labels_together_fail_at_the_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLGOODPUT_LABELS", ",".join(f"e{i}=v" for i in range(20)))
    with pytest.raises(ValueError, match="at most 32 labels, got 40"):
        goodput.GoodputRecorder(
            "many", "goodput_many", True, store="memory://many", labels={f"a{i}": "v" for i in range(20)}
        )


def test_a_step_method_kept_before_the_first_step_asks_the_size_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """An integration that looked the method up once (after the job start) keeps calling the
    first-step wrapper: it records every step and asks for the size only the first time."""
    asked: list[int] = []
    monkeypatch.setattr("mlgoodput._recorder.detect_accelerators", lambda: asked.append(1) or (None, None))
    url = "memory://labels-kept-method"
    with goodput.GoodputRecorder("km", "goodput_km", True, store=url) as r:
        r.record_job_start_time(T0)
        step = r.record_step_start_time  # kept, as a hook or a watcher may keep it
        base = len(asked)
        for k in range(5):
            step(k, T0 + dt.timedelta(seconds=1 + k))
        assert len(asked) - base == 1
        assert r.flush(30)
    assert [e.step for e in read(url, "km") if e.kind is Kind.STEP_START] == [0, 1, 2, 3, 4]
