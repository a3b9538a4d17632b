"""``--prometheus HOST:PORT``: serves the run's figures at ``/metrics`` while it runs.

The text format by default, OpenMetrics when the scraper asks for it (``Accept``),
both written by ``prometheus_client`` from the families of the latest view. The server
is a thread of the parent process; a scrape reads the families already built, so it
costs the run nothing. After the last run of a command, the server stays up until the
final figures have been scraped once (at most two scrape intervals, and 30 s): a run
shorter than one interval is still seen to its end. A scraper that never came is not
waited for.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator, Sequence

from prometheus_client.exposition import start_wsgi_server
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from loadtest.errors import UsageError
from loadtest.live.view import LiveView

__all__ = ["LINGER_MAX_S", "MetricsServer"]

log = logging.getLogger("loadtest")

LINGER_MAX_S = 30.0


class _Latest(Collector):
    """The families of the latest view, and when they were scraped."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._families: Sequence[Metric] = ()
        self.shown_at = 0.0
        self.scrapes: list[float] = []

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            families = self._families
            self.scrapes.append(time.monotonic())
            del self.scrapes[:-8]
        yield from families

    def set(self, families: Sequence[Metric]) -> None:
        with self._lock:
            self._families = tuple(families)
            self.shown_at = time.monotonic()


class MetricsServer:
    """A ``/metrics`` endpoint of the latest view (an open ``--prometheus``)."""

    def __init__(self, host: str, port: int, flag: str = "--prometheus") -> None:
        self._latest = _Latest()
        registry = CollectorRegistry(auto_describe=False)
        registry.register(self._latest)
        try:
            self._server, self._thread = start_wsgi_server(port, host, registry)
        except OSError as exc:
            raise UsageError(f"{flag} {host}:{port}: cannot listen there ({exc})") from exc
        self.port = int(self._server.server_address[1])
        self.host = host
        self.linger_max_s = LINGER_MAX_S
        log.info("prometheus: serving http://%s:%d/metrics", _shown(host), self.port)

    def show(self, view: LiveView, families: Sequence[Metric]) -> None:
        self._latest.set(families)

    def close(self) -> None:
        """Wait for a scrape of the last view (see the module docstring), then stop."""
        if not self._scraped_last():
            deadline = time.monotonic() + self._linger_s(self.linger_max_s)
            try:
                while time.monotonic() < deadline and not self._scraped_last():
                    time.sleep(0.05)
            except KeyboardInterrupt:  # the user does not want to wait: the run is done
                pass
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def _scraped_last(self) -> bool:
        latest = self._latest
        with latest._lock:
            return bool(latest.scrapes) and latest.scrapes[-1] >= latest.shown_at

    def _linger_s(self, most: float) -> float:
        with self._latest._lock:
            scrapes = list(self._latest.scrapes)
        if not scrapes:
            return 0.0  # nobody scrapes: nobody to wait for
        if len(scrapes) < 2:  # no interval seen yet: Prometheus' default one, 15 s
            wait = min(most, 16.0)
        else:
            gaps = [b - a for a, b in itertools.pairwise(scrapes)]
            wait = min(most, 2 * max(gaps) + 1.0)
        log.info("prometheus: waiting up to %.0f s for a last scrape (Ctrl-C: go)", wait)
        return wait


def _shown(host: str) -> str:
    return f"[{host}]" if ":" in host else host
