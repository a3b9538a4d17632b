"""``/metrics`` of the simulated servers, in Prometheus text format.

Values are read from the server's state at scrape time (a custom collector), so the
hot path keeps plain integer counters and pays nothing for the exposition.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

__all__ = [
    "Metric",
    "Sample",
    "counter",
    "counter_by",
    "gauge",
    "histogram",
    "metrics_handler",
    "plain_families",
]

Sample = tuple[str, str, float, str]
"""(name, "counter" | "gauge", value, help), unlabelled. Counter names go without
``_total``."""


def plain_families(samples: Iterable[Sample]) -> list[Metric]:
    """Unlabelled counters and gauges as metric families."""
    return [
        CounterMetricFamily(name, help_text, value=value)
        if kind == "counter"
        else GaugeMetricFamily(name, help_text, value=value)
        for name, kind, value, help_text in samples
    ]


def gauge(name: str, help_text: str, labels: dict[str, str], value: float) -> Metric:
    """One gauge with one label set."""
    family = GaugeMetricFamily(name, help_text, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


def counter(name: str, help_text: str, labels: dict[str, str], value: float) -> Metric:
    """One counter (named without ``_total``) with one label set."""
    family = CounterMetricFamily(name, help_text, labels=list(labels))
    family.add_metric(list(labels.values()), value)
    return family


def counter_by(
    name: str, help_text: str, labels: dict[str, str], label: str, values: dict[str, float]
) -> Metric:
    """A counter with one more label, ``label``, whose values are ``values``' keys."""
    family = CounterMetricFamily(name, help_text, labels=[*labels, label])
    for key, value in values.items():
        family.add_metric([*labels.values(), key], value)
    return family


def histogram(
    name: str,
    help_text: str,
    labels: dict[str, str],
    bounds: Sequence[float],
    cumulative: Sequence[int],
    total: float,
) -> Metric:
    """A histogram from its bounds and cumulative counts (the last one is +Inf's)."""
    family = HistogramMetricFamily(name, help_text, labels=list(labels))
    les = [repr(float(b)) for b in bounds] + ["+Inf"]  # as prometheus_client writes them
    family.add_metric(list(labels.values()), list(zip(les, cumulative, strict=True)), total)
    return family


class _StateCollector(Collector):
    def __init__(self, families: Callable[[], list[Metric]]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families()


def metrics_handler(
    families: Callable[[], list[Metric]],
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """An aiohttp handler exposing ``families()`` at every scrape."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StateCollector(families))

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(
            body=generate_latest(registry),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    return handler
