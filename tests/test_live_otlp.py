"""``--otlp``: the run's figures reach an OTLP/HTTP receiver, decoded with the official
protobuf definitions (opentelemetry-proto), and its last export says what summary.json
says. The receiver is a loopback HTTP server of this test: no collector is packaged
here (Debian's Prometheus 2.42 has no OTLP receiver)."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

from tests.conftest import loadtest_here

SCENARIO = """
name = "otlp"
max_tokens = 16
[[sources]]
kind = "inline"
category = "chat"
prompts = ["a", "b", "c"]
[[sources]]
kind = "inline"
category = "code"
prompts = ["d", "e"]
[load]
concurrency = 3
duration_s = 6
warmup_s = 0.5
"""


class Receiver(http.server.BaseHTTPRequestHandler):
    got: ClassVar[list[ExportMetricsServiceRequest]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        assert self.path == "/v1/metrics"
        assert self.headers["Content-Type"] == "application/x-protobuf"
        req = ExportMetricsServiceRequest()
        req.ParseFromString(body)
        type(self).got.append(req)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return None


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[ExportMetricsServiceRequest]]]:
    got: list[ExportMetricsServiceRequest] = []
    handler = type("R", (Receiver,), {"got": got})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()


def _metrics(req: ExportMetricsServiceRequest) -> dict[str, Any]:
    (rm,) = req.resource_metrics
    (sm,) = rm.scope_metrics
    return {m.name: m for m in sm.metrics}


def _point(metric: Any, category: str, kind: str = "histogram") -> Any:
    points = getattr(metric, kind).data_points
    return [
        p
        for p in points
        if {a.key: a.value.string_value for a in p.attributes}.get("loadtest.category") == category
    ]


def test_otlp_gets_the_run_while_it_goes_and_its_end_equals_the_summary(
    receiver: tuple[str, list[ExportMetricsServiceRequest]], tmp_path: Path
) -> None:
    url, got = receiver
    scenario = tmp_path / "otlp.toml"
    scenario.write_text(SCENARIO)
    out = tmp_path / "out"
    done = loadtest_here("run", str(scenario), "--no-tui", "--out", str(out), "--otlp", url)
    assert done.returncode == 0, done.stderr
    (run_dir,) = out.iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert len(got) >= 2  # at least one while the run went, and its end
    last = _metrics(got[-1])
    resource = {
        a.key: a.value.string_value for a in got[-1].resource_metrics[0].resource.attributes
    }
    assert resource["loadtest.run_id"] == summary["run"]["id"]
    assert resource["service.name"] == "loadtest"
    for metric, name in (("e2e_ms", "loadtest.e2e"), ("ttft_ms", "loadtest.ttft")):
        stats = summary["metrics"][metric]
        (point,) = _point(last[name], "all")
        assert point.count == stats["count"] == sum(point.bucket_counts)
        assert point.min == pytest.approx(stats["min"] / 1e3, abs=1e-6)
        assert point.max == pytest.approx(stats["max"] / 1e3, abs=1e-6)
        exact = {
            next(a.value.double_value for a in p.attributes if a.key == "quantile"): p.as_double
            for p in _point(last[f"{name}.exact"], "all", "gauge")
        }
        assert exact[0.95] == pytest.approx(stats["p95"] / 1e3, abs=1e-9)
        assert exact[0.5] == pytest.approx(stats["p50"] / 1e3, abs=1e-9)
    # The GenAI client metric: every measured request's duration, per category.
    (genai,) = _point(last["gen_ai.client.operation.duration"], "all")
    assert genai.count == summary["metrics"]["e2e_ms"]["count"]
    assert last["gen_ai.client.operation.duration"].unit == "s"
    (tokens,) = last["gen_ai.client.token.usage"].histogram.data_points
    assert tokens.sum == summary["throughput"]["output_tokens"]
    requests = {
        p.attributes[0].value.string_value: p.as_int
        for p in last["loadtest.requests"].sum.data_points
    }
    assert requests == {k: summary["requests"][k] for k in ("ok", "failed", "cancelled")}
    for category, block in summary["by_category"].items():
        (point,) = _point(last["loadtest.ttft"], category)
        assert point.count == block["metrics"]["ttft_ms"]["count"]


def test_a_wrong_otlp_url_is_a_usage_error(tmp_path: Path) -> None:
    done = loadtest_here(
        "run", "--requests", "1", "--out", str(tmp_path), "--no-tui", "--otlp", "collector:4318"
    )
    assert (
        done.returncode == 2 and "--otlp 'collector:4318': give the collector's URL" in done.stderr
    )
