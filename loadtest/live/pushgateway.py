"""``--pushgateway URL``: each run's final figures pushed to a Prometheus Pushgateway.

The convention for batch jobs such as a CI gate: a job that ends before a scrape would
see it pushes its last figures, grouped by job (``loadtest``) and run id (and ``side``
or ``step`` in ``ab`` and ``sweep``), and Prometheus scrapes the gateway. Only a run's
last view is pushed (its figures equal summary.json's); the views while it runs are
for ``--prometheus``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from urllib.error import URLError

from prometheus_client.exposition import push_to_gateway
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from loadtest.live.view import LiveView

__all__ = ["JOB", "Pusher"]

log = logging.getLogger("loadtest")

JOB = "loadtest"


class _Families(Collector):
    def __init__(self, families: Sequence[Metric]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        yield from self._families


class Pusher:
    """Pushes each run's last view to the gateway at ``url`` (an open ``--pushgateway``)."""

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.pushed: list[str] = []
        """The run ids pushed so far."""

    def show(self, view: LiveView, families: Sequence[Metric]) -> None:
        if view.summary is None:
            return
        key = {"run_id": view.run_id, **dict(view.labels)}
        try:
            push_to_gateway(
                self.url, JOB, _Families(families), grouping_key=key, timeout=self.timeout_s
            )
        except (OSError, URLError) as exc:
            # The run's results are on disk whatever the gateway does: say so, go on.
            log.warning("pushgateway: could not push run %s to %s (%s)", view.run_id, self.url, exc)
            return
        self.pushed.append(view.run_id)
        log.info("pushgateway: pushed run %s to %s", view.run_id, self.url)

    def close(self) -> None:
        return None
