"""A TCP fault proxy (in the spirit of Toxiproxy) to put in front of a draft server.

The proxy forwards bytes both ways and, while a toxic is on, misbehaves:

- ``down``: stops listening and drops every connection (new ones are refused);
- ``reset``: resets every connection (RST) as soon as it carries data;
- ``blackhole``: accepts and reads, but forwards nothing in either direction;
- ``latency``: delays every chunk by ``latency_ms`` +/- ``jitter_ms`` (order is kept);
- ``bandwidth``: forwards at most ``bytes_per_s`` per direction.

Switching toxics is synchronous and safe from any task of the same event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import socket
import struct
import time
from dataclasses import dataclass

from loadtest.errors import UsageError

__all__ = ["TOXICS", "FaultProxy", "Toxic"]

TOXICS = ("none", "down", "reset", "blackhole", "latency", "bandwidth")
_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class Toxic:
    """What the proxy does to traffic; ``Toxic()`` forwards faithfully."""

    kind: str = "none"
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    bytes_per_s: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in TOXICS:
            raise UsageError(f"unknown toxic {self.kind!r}; expected one of {', '.join(TOXICS)}")


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.tasks: list[asyncio.Task[None]] = []

    def reset(self) -> None:
        for w in (self.client, self.upstream):
            if w is not None:
                _abort_with_rst(w)
        for t in self.tasks:
            t.cancel()


class FaultProxy:
    """Listens on ``listen_host:listen_port`` and forwards to ``upstream``."""

    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        seed: int = 0,
    ) -> None:
        self.upstream = (upstream_host, upstream_port)
        self.listen_host = listen_host
        self.listen_port = listen_port
        self.toxic = Toxic()
        self.connections = 0
        self.refused_while_down = 0
        self._server: asyncio.Server | None = None
        self._links: set[_Link] = set()
        self._rng = random.Random(seed)

    @property
    def address(self) -> str:
        """``host:port`` the proxy listens on (the port is fixed after ``start``)."""
        return f"{self.listen_host}:{self.listen_port}"

    @property
    def url(self) -> str:
        """``http://host:port`` of the proxy, for HTTP upstreams."""
        return f"http://{self.address}"

    async def start(self) -> None:
        """Start listening (on a free port when ``listen_port`` is 0)."""
        await self._listen()

    async def close(self) -> None:
        """Stop listening and drop every connection."""
        await self._unlisten()

    async def set(self, toxic: Toxic) -> None:
        """Switch to ``toxic`` (``Toxic()`` to heal)."""
        old, self.toxic = self.toxic, toxic
        if toxic.kind == "down" and old.kind != "down":
            await self._unlisten()
        elif toxic.kind != "down" and old.kind == "down":
            await self._listen()
        if toxic.kind == "reset":
            for link in list(self._links):
                link.reset()

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, self.listen_host, self.listen_port, reuse_address=True
        )
        self.listen_port = self._server.sockets[0].getsockname()[1]

    async def _unlisten(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for link in list(self._links):
            link.reset()
        if server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 1.0)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        link = _Link(writer)
        self._links.add(link)
        try:
            if self.toxic.kind == "down":
                self.refused_while_down += 1
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*self.upstream)
            except OSError:
                return  # the upstream is down: the client sees its connection closed
            link.upstream = up_writer
            link.tasks = [
                asyncio.create_task(self._pump(reader, up_writer, link)),
                asyncio.create_task(self._pump(up_reader, writer, link)),
            ]
            await asyncio.gather(*link.tasks, return_exceptions=True)
        finally:
            self._links.discard(link)
            for w in (writer, link.upstream):
                if w is not None and not w.is_closing():
                    w.close()

    async def _pump(
        self, src: asyncio.StreamReader, dst: asyncio.StreamWriter, link: _Link
    ) -> None:
        try:
            while data := await src.read(_CHUNK):
                received = time.perf_counter()
                toxic = self.toxic
                if toxic.kind == "blackhole":
                    continue
                if toxic.kind == "reset":
                    link.reset()
                    return
                if toxic.kind == "latency":
                    delay = toxic.latency_ms + self._rng.uniform(-1, 1) * toxic.jitter_ms
                    wait = received + max(0.0, delay) / 1000 - time.perf_counter()
                    if wait > 0:
                        await asyncio.sleep(wait)
                if toxic.kind == "bandwidth":
                    await self._trickle(data, dst, toxic.bytes_per_s)
                    continue
                dst.write(data)
                await dst.drain()
            if dst.can_write_eof():
                dst.write_eof()
        except (ConnectionError, OSError):
            link.reset()

    @staticmethod
    async def _trickle(data: bytes, dst: asyncio.StreamWriter, rate: float) -> None:
        """Forward ``data`` in 20 ms slices, each after the time it costs at ``rate``."""
        step = max(1, int(rate / 50))
        for i in range(0, len(data), step):
            piece = data[i : i + step]
            await asyncio.sleep(len(piece) / rate)
            dst.write(piece)
            await dst.drain()


def _abort_with_rst(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0), as a crashed peer or middlebox would."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
