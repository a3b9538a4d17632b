"""When response bytes reach the process, stamped where aiohttp receives them.

A stream's reader coroutine runs some time after its bytes arrived: the loop first
hands every ready socket its bytes (``data_received``), then resumes the waiting readers
one after the other, in the next iteration. With a thousand streams that queue is
milliseconds long, and a time taken in the reader would count it as the server's.

``StampingHandler`` is aiohttp's own protocol with one addition: ``rx_ns``, when the
connection's latest bytes arrived. On Linux with asyncio's own transports that is the
kernel's receive stamp (``loadtest._compat.kernel_stamps``), which no stall of this process can
move; elsewhere it is the time of ``data_received``, late by however long the loop was
busy before it polled. Whatever the reader finds buffered arrived no later than
``rx_ns`` (and no later than the reader's own clock), so stamping tokens with it is never
early, and is late only by what arrived on the same connection while the reader waited.
The reader's own clock minus ``rx_ns`` is the client's lag: how long loadtest took to
get round to bytes the machine already had (``client_lag_ms``). ``tx_ns``, the latest
write, says when the request itself left (``write_ms`` after the send began).

aiohttp has no public hook for this; ``TCPConnector`` builds its protocols through the
private ``_factory``. ``stamping_connector`` replaces it only when it looks as expected,
and says whether it did (``stamps_arrivals``), so a changed aiohttp degrades to the
reader's clock rather than breaking; ``self_check`` says up front whether this aiohttp is
one the hook was verified against (``VERIFIED_AIOHTTP``), and a failed check is logged.

The handler also honours what the server says about keeping the connection
(``keep_alive``): a ``Keep-Alive: timeout=N`` makes the pooled connection count as gone
a little before the server would drop it, so aiohttp opens a fresh one rather than
writing a request into a dead socket (and resending it: time that lands in the send).
Some servers close every connection as soon as a response ends, whatever their headers
say (llama.cpp closes each streamed one at once, under ``Keep-Alive: timeout=5``):
a request sent straight after the previous one, before the loop has read that close,
went into the closing socket and was resent, every other request of a run at
concurrency 1 (``benchmarks/bench_llama_overhead.py``). The first time a connection's
peer closes it within ``CLOSES_AFTER_NS`` of a response's end, the connector's
``PoolHints`` learn it, and from then on each connection is closed by the client as
its response ends, so the pool never lends one the server is closing.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

from loadtest._compat import kernel_stamps
from loadtest._compat.checks import CompatCheck, warn_once

__all__ = [
    "CLOSES_AFTER_NS",
    "VERIFIED_AIOHTTP",
    "PoolHints",
    "StampingHandler",
    "arrival_stamps",
    "keepalive_s",
    "self_check",
    "stamping_connector",
    "stamps_arrivals",
]

_perf = time.perf_counter_ns
VERIFIED_AIOHTTP = ((3, 9), (3, 14))
"""First and last aiohttp (major, minor) whose connector and protocol the hook was read
against (pyproject.toml pins below the next minor)."""
_HANDLER_PARTS = (
    "connection_lost",
    "connection_made",
    "data_received",
    "eof_received",
    "is_connected",
    "set_response_params",
)
CLOSES_AFTER_NS = 250_000_000
"""A peer's close this soon after a response ended means it closes after every response
(an idle timeout is seconds); the margin covers a busy loop reading the close late."""


class PoolHints:
    """What one connector's connections have learnt about the server, shared by them."""

    __slots__ = ("closes_after_response",)

    def __init__(self) -> None:
        self.closes_after_response = False
        """The server closed a connection right after a response: pool none of them."""


def _version(text: str) -> tuple[int, int]:
    parts = text.split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        return (0, 0)


@functools.cache
def self_check() -> CompatCheck:
    """Whether this aiohttp builds protocols through ``_factory`` as the hook expects."""
    name = "arrivals"
    first, last = VERIFIED_AIOHTTP
    if not first <= _version(aiohttp.__version__) <= last:
        return CompatCheck(name, False, f"aiohttp {aiohttp.__version__} not verified")
    if "_factory" not in aiohttp.BaseConnector.__init__.__code__.co_names:
        return CompatCheck(name, False, "BaseConnector no longer sets _factory")
    missing = [a for a in _HANDLER_PARTS if not hasattr(ResponseHandler, a)]
    if missing:
        return CompatCheck(name, False, "ResponseHandler lacks " + ", ".join(missing))
    if "_protocol" not in aiohttp.ClientResponse.start.__code__.co_names:
        return CompatCheck(name, False, "ClientResponse no longer keeps _protocol")
    return CompatCheck(name, True, f"aiohttp {aiohttp.__version__} connector _factory")


def keepalive_s(header: str | None) -> tuple[float | None, bool]:
    """(idle timeout, last request) from a ``Keep-Alive`` header value.

    ``timeout=5, max=100``: the server drops the connection after 5 s idle and serves
    at most 100 more requests on it; ``max`` of 0 or 1 means this is (nearly) the last.
    """
    if not header:
        return None, False
    timeout: float | None = None
    last = False
    for part in header.split(","):
        key, _, value = part.strip().partition("=")
        try:
            if key.lower() == "timeout":
                timeout = float(value)
            elif key.lower() == "max":
                last = int(value) <= 1
        except ValueError:
            continue
    return timeout, last


class StampingHandler(ResponseHandler):
    """aiohttp's response protocol, remembering when bytes last arrived and left."""

    rx_ns: int = 0
    """``perf_counter_ns`` arrival of the latest bytes (0: none yet): the kernel's stamp
    where ``kernel`` is true, else the time of ``data_received``."""
    kernel: bool = False
    """Whether the kernel stamps this connection's reads (``loadtest._compat.kernel_stamps``)."""
    tx_ns: int = 0
    """``perf_counter_ns`` of the latest write to the transport (0: none, or a transport
    that cannot be wrapped, such as uvloop's)."""
    idle_until_ns: int = 0
    """When the server will have dropped this connection if it stays idle (0: unknown)."""
    uses: int = 0
    """Requests that have taken this connection (``keep_alive`` checks it is still its)."""
    done_ns: int = 0
    """When the latest response on it ended (``keep_alive``), 0 before one has."""
    hints: PoolHints | None = None
    """The connector's shared hints (``stamping_connector`` gives each protocol them)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, *, hints: PoolHints | None = None) -> None:
        super().__init__(loop)
        self.hints = hints

    def keep_alive(self, header: str | None, use: int) -> None:
        """Note the server's ``Keep-Alive`` header of the response just read.

        ``use`` is ``uses`` when the response began: if the pool has lent the connection
        on since, the next response speaks for it instead. The server counts idle time
        from its last write and this runs after the reader saw the end, so the deadline
        keeps a margin (a quarter of the timeout, at most 1 s).
        """
        if use != self.uses:
            return
        self.done_ns = _perf()
        timeout, last = keepalive_s(header)
        if last or (self.hints is not None and self.hints.closes_after_response):
            self.force_close()  # the server serves no more requests on it (or closes now)
            self.idle_until_ns = 1
        elif timeout is not None:
            margin = min(timeout / 4, 1.0)
            self.idle_until_ns = _perf() + int((timeout - margin) * 1e9)

    def set_response_params(self, *args: Any, **kwargs: Any) -> None:
        """aiohttp calls this as it takes the connection for a request: busy again."""
        self.idle_until_ns = 0
        self.uses += 1
        super().set_response_params(*args, **kwargs)

    def is_connected(self) -> bool:
        """False once idle past the server's keep-alive: the pool then opens a new one."""
        until = self.idle_until_ns
        if until and _perf() >= until:
            return False
        return super().is_connected()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Have the kernel stamp reads where it can; wrap writes so each one is stamped."""
        super().connection_made(transport)
        self.kernel = kernel_stamps.install(transport, self)
        write = getattr(transport, "write", None)
        writelines = getattr(transport, "writelines", None)
        if write is None or writelines is None:
            return

        def stamped_write(data: Any) -> None:
            self.tx_ns = _perf()
            write(data)

        def stamped_writelines(chunks: Any) -> None:
            self.tx_ns = _perf()
            writelines(chunks)

        try:
            transport.write = stamped_write  # type: ignore[attr-defined]
            transport.writelines = stamped_writelines  # type: ignore[attr-defined]
        except AttributeError:  # a C transport (uvloop): no send stamps
            pass

    def _peer_closed(self) -> None:
        done = self.done_ns
        if done and self.hints is not None and _perf() - done < CLOSES_AFTER_NS:
            self.hints.closes_after_response = True

    def eof_received(self) -> None:
        """The peer closed: soon after a response ended, it will close every one."""
        self._peer_closed()
        super().eof_received()

    def connection_lost(self, exc: BaseException | None) -> None:
        """A reset (a request written into the closing socket) is the peer's close too."""
        if exc is not None:
            self._peer_closed()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Stamp (unless the kernel did), then let aiohttp parse as always."""
        if data and not self.kernel:
            self.rx_ns = _perf()
        super().data_received(data)


def stamping_connector(**kwargs: Any) -> aiohttp.TCPConnector:
    """A ``TCPConnector(**kwargs)`` whose connections stamp arrivals where it can."""
    connector = aiohttp.TCPConnector(**kwargs)
    check = self_check()
    if not check.ok:
        warn_once(check)
        return connector
    factory = getattr(connector, "_factory", None)
    if isinstance(factory, functools.partial) and factory.func is ResponseHandler:
        connector._factory = functools.partial(  # type: ignore[assignment]
            StampingHandler, *factory.args, hints=PoolHints(), **factory.keywords
        )
    return connector


def stamps_arrivals(connector: aiohttp.BaseConnector) -> bool:
    """Whether ``connector`` builds ``StampingHandler`` protocols."""
    factory = getattr(connector, "_factory", None)
    return isinstance(factory, functools.partial) and factory.func is StampingHandler


def arrival_stamps(resp: aiohttp.ClientResponse) -> StampingHandler | None:
    """The stamping protocol under ``resp``, or None (then use the reader's clock).

    A response read late (exactly when stamps matter) may have been received whole and
    its connection handed back to the pool, so ``resp.connection`` is None by then; the
    response keeps its protocol in ``_protocol``. If the pool lent that connection on,
    ``rx_ns`` is a later arrival: still no later than the reader's clock, never early.
    """
    proto = getattr(resp, "_protocol", None)
    if proto is None and resp.connection is not None:
        proto = resp.connection.protocol
    return proto if isinstance(proto, StampingHandler) else None
