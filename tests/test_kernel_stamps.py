"""Kernel receive stamps: a blocked event loop cannot make bytes look late."""

from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import sys
import time

import pytest
import trustme
import uvloop

from loadtest._compat import kernel_stamps

HOG_S = 0.05
linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SO_TIMESTAMPNS")


class _Stamped(asyncio.Protocol):
    """A plain protocol that notes the kernel's stamp and when it saw the bytes."""

    def __init__(self) -> None:
        self.rx_ns = 0
        self.kernel = False
        self.seen: list[tuple[bytes, int, int]] = []  # (bytes, rx_ns, data_received time)
        self.got = asyncio.Event()
        self.eof = asyncio.Event()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.kernel = kernel_stamps.install(transport, self)

    def data_received(self, data: bytes) -> None:
        self.seen.append((data, self.rx_ns, time.perf_counter_ns()))
        self.got.set()

    def eof_received(self) -> None:
        self.eof.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof.set()


def _block_loop() -> int:
    """Hold the event loop, as a driver busy with other streams would; when it began."""
    began = time.perf_counter_ns()
    time.sleep(HOG_S)
    return began


async def _send_while_blocked(
    peer: socket.socket, proto: _Stamped, payload: bytes
) -> tuple[int, int, bytes, int, int]:
    # The peer writes, then this process's loop is held for HOG_S before it may poll.
    proto.got.clear()
    sent = time.perf_counter_ns()
    peer.sendall(payload)
    hog = _block_loop()
    await asyncio.wait_for(proto.got.wait(), 5)
    data, rx, seen = proto.seen[-1]
    return sent, hog, data, rx, seen


def _before_the_hog(sent: int, rx: int, hog: int) -> bool:
    """Whether stamp ``rx`` is the arrival: after the send, before the hog that held the loop.

    Over loopback the bytes arrive within the sending call, so before the hog begins;
    read by the loop they would be stamped after it ended (``hog + HOG_S``). Half the hog
    is allowed past its start for the conversion to perf_counter, whose error is the time
    between two adjacent clock reads: this fails only on a 25 ms preemption inside that
    window (or a deferred loopback delivery that long), instead of a 10 ms one anywhere
    between the send and the read.
    """
    return sent <= rx < hog + HOG_S * 1e9 / 2


@linux_only
async def test_a_stamp_is_the_arrival_not_when_a_blocked_loop_got_round_to_it(
    kernel_stamping: bool,
) -> None:
    assert kernel_stamping
    loop = asyncio.get_running_loop()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        transport, proto = await loop.create_connection(_Stamped, "127.0.0.1", port)
        peer, _ = listener.accept()
        try:
            assert proto.kernel
            for payload in (b"first", b"second" * 1000):
                sent, hog, data, rx, seen = await _send_while_blocked(peer, proto, payload)
                assert data == payload
                # The loop saw the bytes only after the hog...
                assert seen - sent >= HOG_S * 1e9
                # ...but the stamp is when they arrived: after the send, before the hog.
                assert _before_the_hog(sent, rx, hog), ((rx - sent) / 1e6, (hog - sent) / 1e6)
            peer.close()
            await asyncio.wait_for(proto.eof.wait(), 5)  # EOF still reaches the protocol
        finally:
            transport.close()


@linux_only
async def test_tls_reads_are_stamped_on_the_socket_beneath(kernel_stamping: bool) -> None:
    assert kernel_stamping
    # TLS protocols are buffered (get_buffer/buffer_updated): the other read path.
    ca = trustme.CA()
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_ctx)
    client_ctx = ssl.create_default_context()
    ca.configure_trust(client_ctx)
    writers: list[asyncio.StreamWriter] = []
    accepted = asyncio.Event()

    async def on_client(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        writers.append(w)
        accepted.set()

    loop = asyncio.get_running_loop()
    server = await asyncio.start_server(on_client, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    transport, proto = await loop.create_connection(
        _Stamped, "127.0.0.1", port, ssl=client_ctx, server_hostname="127.0.0.1"
    )
    try:
        assert proto.kernel
        await asyncio.wait_for(accepted.wait(), 5)
        # The server writes from this same loop: the bytes reach the socket during the
        # write, then the hog holds the loop before the client may read them.
        sent = time.perf_counter_ns()
        writers[0].write(b"over tls")
        hog = _block_loop()
        await asyncio.wait_for(proto.got.wait(), 5)
        data, rx, seen = proto.seen[-1]
        assert data == b"over tls"
        assert seen - sent >= HOG_S * 1e9
        assert _before_the_hog(sent, rx, hog), ((rx - sent) / 1e6, (hog - sent) / 1e6)
    finally:
        transport.close()
        for w in writers:
            w.close()
        server.close()
        await server.wait_closed()


def test_the_kernel_clock_is_converted_to_perf_counter() -> None:
    # Bracketed by perf_counter reads, a stamp of "5 ms before the wall clock was read"
    # must convert to 5 ms before some instant in [p0, p1]: the conversion reads the wall
    # clock then perf_counter, and their gap only moves it later, up to p1. So the check
    # is exact however long the process is descheduled in between (a fixed 1 ms bound
    # failed on a preemption); 10 us covers the clocks' read granularity and slew.
    p0 = time.perf_counter_ns()
    wall = time.time_ns() - 5_000_000  # a segment that arrived 5 ms ago
    anc = [
        (socket.SOL_SOCKET, kernel_stamps.SO_TIMESTAMPNS, struct.pack("@qq", *divmod(wall, 10**9)))
    ]
    at = kernel_stamps.kernel_stamp(anc)
    p1 = time.perf_counter_ns()
    assert p0 - 5_000_000 - 10_000 <= at <= p1 - 5_000_000 + 10_000, (at - p0, p1 - p0)


def test_a_stamp_is_never_later_than_now_and_missing_means_now() -> None:
    before = time.perf_counter_ns()
    future = time.time_ns() + 10**9  # a wall clock stepped back would look like this
    anc = [
        (
            socket.SOL_SOCKET,
            kernel_stamps.SO_TIMESTAMPNS,
            struct.pack("@qq", *divmod(future, 10**9)),
        )
    ]
    assert before <= kernel_stamps.kernel_stamp(anc) <= time.perf_counter_ns()
    assert before <= kernel_stamps.kernel_stamp([]) <= time.perf_counter_ns()


def test_transports_it_cannot_read_are_left_alone() -> None:
    # uvloop's transports are C: no stamps, and the connection works as before.
    async def main() -> tuple[bool, bytes]:
        loop = asyncio.get_running_loop()
        with socket.create_server(("127.0.0.1", 0)) as listener:
            transport, proto = await loop.create_connection(
                _Stamped, "127.0.0.1", listener.getsockname()[1]
            )
            peer, _ = listener.accept()
            with peer:
                peer.sendall(b"plain")
                await asyncio.wait_for(proto.got.wait(), 5)
            transport.close()
            return proto.kernel, proto.seen[0][0]

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        assert runner.run(main()) == (False, b"plain")
