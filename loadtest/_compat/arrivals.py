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
reader's clock rather than breaking.
"""

from __future__ import annotations

import asyncio
import functools
import time
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

from loadtest._compat import kernel_stamps

__all__ = ["StampingHandler", "arrival_stamps", "stamping_connector", "stamps_arrivals"]

_perf = time.perf_counter_ns


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

    def data_received(self, data: bytes) -> None:
        """Stamp (unless the kernel did), then let aiohttp parse as always."""
        if data and not self.kernel:
            self.rx_ns = _perf()
        super().data_received(data)


def stamping_connector(**kwargs: Any) -> aiohttp.TCPConnector:
    """A ``TCPConnector(**kwargs)`` whose connections stamp arrivals where it can."""
    connector = aiohttp.TCPConnector(**kwargs)
    factory = getattr(connector, "_factory", None)
    if isinstance(factory, functools.partial) and factory.func is ResponseHandler:
        connector._factory = functools.partial(  # type: ignore[assignment]
            StampingHandler, *factory.args, **factory.keywords
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
