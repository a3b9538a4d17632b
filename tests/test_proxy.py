"""The TCP fault proxy, each toxic tested with real loopback sockets."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from loadtest.errors import UsageError
from loadtest.features.faults.proxy import FaultProxy, Toxic


@pytest.fixture
async def echo() -> AsyncIterator[int]:
    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        try:
            while data := await r.read(65536):
                w.write(data)
                await w.drain()
        except ConnectionError:
            pass
        finally:
            w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1]
    server.close()


@pytest.fixture
async def proxy(echo: int) -> AsyncIterator[FaultProxy]:
    p = FaultProxy("127.0.0.1", echo)
    await p.start()
    yield p
    await p.close()


async def _roundtrip(p: FaultProxy, payload: bytes = b"ping", wait_s: float = 2.0) -> bytes:
    r, w = await asyncio.open_connection("127.0.0.1", p.listen_port)
    try:
        w.write(payload)
        await w.drain()
        return await asyncio.wait_for(r.readexactly(len(payload)), wait_s)
    finally:
        w.close()


async def test_no_toxic_forwards_both_ways(proxy: FaultProxy) -> None:
    assert await _roundtrip(proxy, b"hello world") == b"hello world"


async def test_latency_delays_each_direction(proxy: FaultProxy) -> None:
    await proxy.set(Toxic("latency", latency_ms=100))
    t0 = time.perf_counter()
    assert await _roundtrip(proxy) == b"ping"
    assert time.perf_counter() - t0 >= 0.19  # 100 ms there and 100 ms back


async def test_bandwidth_limits_the_rate(proxy: FaultProxy) -> None:
    await proxy.set(Toxic("bandwidth", bytes_per_s=20_000))
    t0 = time.perf_counter()
    payload = b"x" * 10_000
    r, w = await asyncio.open_connection("127.0.0.1", proxy.listen_port)
    w.write(payload)
    await w.drain()
    got = await asyncio.wait_for(r.readexactly(len(payload)), 5)
    w.close()
    assert got == payload
    assert time.perf_counter() - t0 >= 0.45  # 10 kB at 20 kB/s, each way


async def test_blackhole_swallows_everything(proxy: FaultProxy) -> None:
    await proxy.set(Toxic("blackhole"))
    with pytest.raises(TimeoutError):
        await _roundtrip(proxy, wait_s=0.3)
    await proxy.set(Toxic())
    assert await _roundtrip(proxy) == b"ping"


async def test_reset_breaks_open_and_new_connections(proxy: FaultProxy) -> None:
    r, w = await asyncio.open_connection("127.0.0.1", proxy.listen_port)
    w.write(b"a")
    await w.drain()
    assert await r.readexactly(1) == b"a"
    await proxy.set(Toxic("reset"))
    w.write(b"b")
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
        await asyncio.wait_for(r.readexactly(1), 2)
    with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
        await _roundtrip(proxy)
    await proxy.set(Toxic())
    assert await _roundtrip(proxy) == b"ping"


async def test_down_refuses_connections_and_heals(proxy: FaultProxy) -> None:
    port = proxy.listen_port
    await proxy.set(Toxic("down"))
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", port)
    await proxy.set(Toxic())
    assert proxy.listen_port == port
    assert await _roundtrip(proxy) == b"ping"


def test_unknown_toxic_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="unknown toxic 'flood'"):
        Toxic("flood")
