"""Exporters by name, and the exporter contract (export/_contract.py) made explicit."""

from __future__ import annotations

import pickle
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from mlgoodput.export import (
    CloudMonitoringExporter,
    GCPOptions,
    OTLPExporter,
    PrometheusExporter,
    Sample,
    TensorBoardExporter,
    _contract,
    exporter_names,
    make_exporter,
)
from mlgoodput.export._registry import register_exporter


def test_each_exporter_is_built_by_name(tmp_path: Path) -> None:
    assert {"tensorboard", "prometheus", "otlp", "gcp"} <= set(exporter_names())
    tb = make_exporter("tensorboard", logdir=tmp_path, exclusive=True)
    assert isinstance(tb, TensorBoardExporter) and tb.exclusive and tb.logdir == str(tmp_path)
    prom = make_exporter("prometheus", port=0)
    assert isinstance(prom, PrometheusExporter) and prom.addr == "127.0.0.1"
    otlp = make_exporter("otlp", endpoint="http://127.0.0.1:4318", protocol="http")
    assert isinstance(otlp, OTLPExporter) and otlp.endpoint.endswith("/v1/metrics")
    gcp = make_exporter("gcp", gcp_options=GCPOptions(project_id="p", location="us-central1"))
    assert isinstance(gcp, CloudMonitoringExporter) and gcp.gcp_options.project_id == "p"
    for e in (tb, prom, otlp, gcp):  # the contract: every built-in exporter travels by pickle
        assert type(pickle.loads(pickle.dumps(e))) is type(e)
        assert _contract.check_exporter(e) is e


def test_unknown_names_and_bad_options_fail_naming_them() -> None:
    with pytest.raises(ValueError, match=r"unknown exporter 'statsd' \(known: .*prometheus"):
        make_exporter("statsd")
    with pytest.raises(ValueError, match="port must be"):
        make_exporter("prometheus", port=-1)
    with pytest.raises(ValueError, match="name"):
        register_exporter("", PrometheusExporter)


class _Plain:
    """The contract's required part only: export and shutdown."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def export(self, samples: Sequence[Sample]) -> None:
        self.calls.append("export")

    def shutdown(self, timeout_s: float | None = None) -> None:
        self.calls.append(f"shutdown {timeout_s}")


class _Full(_Plain):
    def start(self) -> None:
        self.calls.append("start")

    def flush(self, timeout_s: float | None = None) -> None:
        self.calls.append(f"flush {timeout_s}")


def test_optional_steps_run_only_for_exporters_that_have_them() -> None:
    plain, full = _Plain(), _Full()
    for e in (plain, full):
        _contract.start(e)
        e.export([Sample("goodput/goodput_pct", 1.0)])
        _contract.flush(e, 2.0)
        _contract.close(e, 3.0)
    assert plain.calls == ["export", "shutdown 3.0"]
    assert full.calls == ["start", "export", "flush 2.0", "shutdown 3.0"]


def test_check_exporter_names_what_is_wrong() -> None:
    with pytest.raises(TypeError, match=r"exporters must follow the Exporter protocol \(export, shutdown\)"):
        _contract.check_exporter(object())

    class Unpicklable(_Plain):
        def __init__(self) -> None:
            super().__init__()
            self.lock = threading.Lock()  # live state left in the pickle

    with pytest.raises(TypeError, match="cannot be sent to the exporter process"):
        _contract.check_exporter(Unpicklable())


def test_every_registered_exporter_runs_the_contract_suite() -> None:
    from tests.export.cases import CASES

    assert set(exporter_names()) == {exporter for exporter, _ in CASES.values()}
