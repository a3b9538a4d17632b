"""When each request's last byte reached this machine, as the kernel stamped it.

The simulator's truth of a request starts there, not when its process got round to
the request (``loadtest._compat.kernel_stamps``).
"""

from __future__ import annotations

import weakref
from typing import Any

from aiohttp import web

from loadtest._compat import kernel_stamps

__all__ = ["Arrival", "Arrivals", "stamp_arrivals"]


class Arrival:
    """The latest read's kernel stamp on one connection (0 before any)."""

    __slots__ = ("rx_ns",)

    def __init__(self) -> None:
        self.rx_ns = 0


Arrivals = weakref.WeakKeyDictionary[Any, Arrival]
"""Per connection (by transport), when its latest bytes reached the kernel."""


def stamp_arrivals(server: web.Server, arrivals: Arrivals) -> None:
    """Have the kernel stamp each new connection's reads into ``arrivals``.

    The truth of a request then starts when its last byte reached this machine, not
    when this process got round to it. aiohttp calls ``Server.connection_made`` for
    every connection before its first read; where stamps are not possible (uvloop, not
    Linux), ``received_ns`` stays the handler's start.
    """
    made = server.connection_made

    def connection_made(handler: Any, transport: Any) -> None:
        arrival = Arrival()
        if kernel_stamps.install(transport, arrival):
            arrivals[transport] = arrival
        made(handler, transport)

    server.connection_made = connection_made  # type: ignore[method-assign]
