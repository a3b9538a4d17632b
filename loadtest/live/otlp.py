"""``--otlp URL``: the run's figures as OpenTelemetry metrics, over OTLP/HTTP (protobuf).

The OpenTelemetry SDK's OTLP exporter sends what is built here from the view, every
``EVERY_VIEWS`` views and at each run's end: the GenAI semantic conventions' client
metrics (``gen_ai.client.operation.duration``: each measured request's end-to-end time;
``gen_ai.client.token.usage``: its output tokens, as a count and a sum, since loadtest
keeps no histogram of tokens per request) and loadtest's own under ``loadtest.*``: every
latency as a histogram on the same buckets as ``--prometheus`` with its exact min and max,
the HDR percentiles (``loadtest.<metric>.exact``, attribute ``quantile``), and the
request counters. Attributes: ``loadtest.category`` (``all``: the whole mix), the view's
labels as ``loadtest.side``/``loadtest.step``, and the run as the resource.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Gauge,
    Histogram,
    HistogramDataPoint,
    Metric,
    MetricExportResult,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from loadtest.live.families import BUCKETS_S, EXPORTED, cumulative_buckets, loadtest_version
from loadtest.live.view import LiveView
from loadtest.measure.hdr import PERCENTILES, metric_stats

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric as Family

__all__ = ["EVERY_VIEWS", "OtlpSender", "metrics_data"]

log = logging.getLogger("loadtest")

EVERY_VIEWS = 5
"""Views between two exports while a run goes (about 5 s); the last is always sent."""

_CUMULATIVE = AggregationTemporality.CUMULATIVE


def otel_name(metric: str) -> str:
    """``ttft_ms`` -> ``loadtest.ttft``; ``e2e_ms_corrected`` -> ``loadtest.e2e.corrected``."""
    base = metric.removesuffix("_corrected").removesuffix("_ms")
    return f"loadtest.{base}" + (".corrected" if metric.endswith("_corrected") else "")


def metrics_data(view: LiveView, start_ns: int, now_ns: int) -> MetricsData:
    """The view as one OTLP export (pure: the times are given)."""
    run = {
        "service.name": "loadtest",
        "service.version": loadtest_version(),
        "loadtest.run_id": view.run_id,
        "loadtest.scenario": view.scenario.name,
        "loadtest.endpoint": view.endpoint,
    }
    scope = InstrumentationScope("loadtest", loadtest_version())
    metrics = list(_metrics(view, start_ns, now_ns))
    return MetricsData(
        [ResourceMetrics(Resource.create(run), [ScopeMetrics(scope, metrics, "")], "")]
    )


def _metrics(view: LiveView, start: int, now: int) -> Iterator[Metric]:
    own = {f"loadtest.{k}": v for k, v in view.labels}
    for metric in EXPORTED:
        points, exact = [], []
        for category, ms in view.sets().items():
            h = ms.hists[metric]
            n = h.get_total_count()
            if not n:
                continue
            attrs = {**own, "loadtest.category": category}
            cum = [int(c) for c in cumulative_buckets(h)]
            per = [b - a for a, b in zip([0, *cum], [*cum, n], strict=True)]
            total = ms.sums[metric] / 1e6
            points.append(
                HistogramDataPoint(
                    attrs,
                    start,
                    now,
                    n,
                    total,
                    per,
                    list(BUCKETS_S),
                    h.get_min_value() / 1e6,
                    h.get_max_value() / 1e6,
                )
            )
            stats = metric_stats(h, ms.sums[metric])
            for key, q in PERCENTILES:
                v = stats.get(key)
                if isinstance(v, int | float):
                    a: dict[str, str | float] = {**attrs, "quantile": q / 100}
                    exact.append(NumberDataPoint(a, start, now, float(v) / 1e3))
        if not points:
            continue
        name = otel_name(metric)
        yield Metric(name, f"{metric} of measured requests", "s", Histogram(points, _CUMULATIVE))
        yield Metric(f"{name}.exact", "the HDR histogram's exact percentiles", "s", Gauge(exact))
        if metric == "e2e_ms":
            genai = [_genai(p) for p in points]
            yield Metric(
                "gen_ai.client.operation.duration",
                "GenAI operation duration",
                "s",
                Histogram(genai, _CUMULATIVE),
            )
    m = view.metrics
    yield Metric(
        "gen_ai.client.token.usage",
        "Number of output tokens used (a count and a sum: no per-request histogram)",
        "{token}",
        Histogram(
            [
                HistogramDataPoint(
                    {**own, "gen_ai.operation.name": "chat", "gen_ai.token.type": "output"},
                    start,
                    now,
                    m.measured_ok,
                    m.output_tokens,
                    [m.measured_ok],
                    [],
                    0.0,
                    0.0,
                )
            ],
            _CUMULATIVE,
        ),
    )
    outcomes = [
        NumberDataPoint({**own, "loadtest.outcome": o}, start, now, m.outcomes.get(o, 0))
        for o in ("ok", "failed", "cancelled")
    ]
    yield Metric(
        "loadtest.requests",
        "Requests accounted for, warm-up included",
        "{request}",
        Sum(outcomes, _CUMULATIVE, True),
    )
    yield Metric(
        "loadtest.in_flight",
        "Requests sent and not yet ended",
        "{request}",
        Gauge([NumberDataPoint(own, start, now, view.in_flight)]),
    )


def _genai(p: HistogramDataPoint) -> HistogramDataPoint:
    attrs = {"gen_ai.operation.name": "chat", **dict(p.attributes or {})}
    return HistogramDataPoint(
        attrs,
        p.start_time_unix_nano,
        p.time_unix_nano,
        p.count,
        p.sum,
        p.bucket_counts,
        p.explicit_bounds,
        p.min,
        p.max,
    )


class OtlpSender:
    """An open ``--otlp``: exports every ``EVERY_VIEWS`` views and each run's last."""

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        endpoint = self.url if self.url.endswith("/v1/metrics") else f"{self.url}/v1/metrics"
        self._exporter = OTLPMetricExporter(endpoint=endpoint, timeout=timeout_s)
        self._views = 0
        self._start_ns = time.time_ns()
        self._run: str | None = None
        self.sent = 0
        """Exports the collector accepted."""

    def show(self, view: LiveView, families: Sequence[Family]) -> None:
        if view.run_id != self._run:  # a new run: its counters start again
            self._run, self._views, self._start_ns = view.run_id, 0, time.time_ns()
        self._views += 1
        if view.summary is None and self._views % EVERY_VIEWS:
            return
        data = metrics_data(view, self._start_ns, time.time_ns())
        if self._exporter.export(data) is MetricExportResult.SUCCESS:
            self.sent += 1
        else:  # the results are on disk whatever the collector does
            log.warning("otlp: %s did not take the export of run %s", self.url, view.run_id)

    def close(self) -> None:
        self._exporter.shutdown()
