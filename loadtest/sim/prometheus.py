"""``/metrics`` of the simulated servers, in Prometheus text format.

Values are read from the server's state at scrape time (a custom collector), so the
hot path keeps plain integer counters and pays nothing for the exposition.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

from aiohttp import web
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["Sample", "metrics_handler"]

Sample = tuple[str, str, float, str]
"""(name, "counter" | "gauge", value, help). Counter names go without ``_total``."""


class _StateCollector(Collector):
    def __init__(self, samples: Callable[[], list[Sample]]) -> None:
        self._samples = samples

    def collect(self) -> Iterator[Metric]:
        for name, kind, value, help_text in self._samples():
            if kind == "counter":
                yield CounterMetricFamily(name, help_text, value=value)
            else:
                yield GaugeMetricFamily(name, help_text, value=value)


def metrics_handler(
    samples: Callable[[], list[Sample]],
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """An aiohttp handler exposing ``samples()`` at every scrape."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_StateCollector(samples))

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(
            body=generate_latest(registry),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    return handler
