"""loadtest's own live output kinds, as registered in ``loadtest.live``: each declares
its flag and opens its output; the output's module (and ``prometheus_client``) loads
only when the flag was given, so the command line's start does not pay for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from loadtest.errors import MissingExtraError, UsageError

if TYPE_CHECKING:
    from loadtest.live.otlp import OtlpSender
    from loadtest.live.prometheus import MetricsServer
    from loadtest.live.pushgateway import Pusher

__all__ = [
    "OTLP",
    "PROMETHEUS",
    "PUSHGATEWAY",
    "OtlpKind",
    "PrometheusKind",
    "PushgatewayKind",
    "check_url",
    "parse_host_port",
]


def parse_host_port(value: str, flag: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6; port 0: any free port)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"{flag} {value!r}: give HOST:PORT, e.g. 127.0.0.1:9464")
    return host.strip("[]") or "0.0.0.0", int(port)


def check_url(value: str, flag: str, what: str) -> None:
    """``UsageError`` naming ``flag`` unless ``value`` is an http(s) URL with a host."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UsageError(f"{flag} {value!r}: give {what}")


@dataclass(frozen=True, slots=True)
class PrometheusKind:
    """``--prometheus HOST:PORT``: a ``/metrics`` endpoint (``live.prometheus``)."""

    flag: str = "--prometheus"
    metavar: str = "HOST:PORT"
    help: str = (
        "serve the run's figures at http://HOST:PORT/metrics while it runs "
        "(Prometheus text or OpenMetrics; port 0: any free port)"
    )

    def open(self, value: str) -> MetricsServer:
        host, port = parse_host_port(value, self.flag)
        from loadtest.live.prometheus import MetricsServer

        return MetricsServer(host, port, self.flag)


@dataclass(frozen=True, slots=True)
class PushgatewayKind:
    """``--pushgateway URL``: each run's final figures pushed (``live.pushgateway``)."""

    flag: str = "--pushgateway"
    metavar: str = "URL"
    help: str = (
        "at the end of each run, push its final figures to the Prometheus Pushgateway "
        "at URL (job loadtest, grouped by run id)"
    )

    def open(self, value: str) -> Pusher:
        check_url(value, self.flag, "the gateway's URL, e.g. http://127.0.0.1:9091")
        from loadtest.live.pushgateway import Pusher

        return Pusher(value)


@dataclass(frozen=True, slots=True)
class OtlpKind:
    """``--otlp URL``: the figures as OpenTelemetry metrics over OTLP/HTTP (``live.otlp``)."""

    flag: str = "--otlp"
    metavar: str = "URL"
    help: str = (
        "send the run's figures to the OTLP/HTTP collector at URL (/v1/metrics; "
        "protobuf) every 5 s and at each run's end, with the GenAI metric names; "
        "needs loadtest[otlp]"
    )

    def open(self, value: str) -> OtlpSender:
        check_url(value, self.flag, "the collector's URL, e.g. http://127.0.0.1:4318")
        try:
            from loadtest.live.otlp import OtlpSender
        except ImportError as exc:
            raise MissingExtraError(f"{self.flag} ({exc.name} is missing)", "otlp") from exc
        return OtlpSender(value)


PROMETHEUS = PrometheusKind()
OTLP = OtlpKind()
PUSHGATEWAY = PushgatewayKind()
