"""Arrival times from the kernel: when bytes reached the socket, not when the loop read them.

A time taken in Python, even in ``data_received``, is late by however long the event
loop was busy before it polled the socket: with a thousand streams, milliseconds. Linux
stamps every received segment (``SO_TIMESTAMPNS``) and hands the stamp of the newest
segment of a read to ``recvmsg`` as ancillary data. ``install`` makes a socket
transport read that way and store the stamp, converted to ``perf_counter_ns``, on a
holder just before the protocol sees the bytes. The stamp is the kernel's, so no stall
of this process (loop, collector, scheduler) can move it; it is never earlier than the
bytes it covers, because it is the arrival of the last of them.

asyncio's socket transport has no public hook for its read; ``install`` replaces the
private read callback of ``_SelectorSocketTransport`` (the same few lines, ``recvmsg``
instead of ``recv``) only when every private part it relies on is there, and says
whether it did. Elsewhere (uvloop's C transports, other platforms) callers keep their
own clock. Under TLS the stamp is taken on the socket transport beneath, when the
ciphertext arrives. Linux turns stamping on a moment after the first socket of the
machine asks for it, so the very first reads may carry no stamp: those, like any read
without one, are stamped when the loop read them, which is late but never early.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["ArrivalHolder", "install", "kernel_stamp"]

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
"""Linux's option number; Python's socket module does not name it."""
_CMSG_SPACE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
_TIMESPEC = struct.Struct("@qq")
_SOL_SOCKET = socket.SOL_SOCKET
_perf = time.perf_counter_ns
_wall = time.time_ns
_NEEDED = ("_read_ready_cb", "_conn_lost", "_fatal_error", "_read_ready__on_eof", "max_size")


class ArrivalHolder(Protocol):
    """Anything with an ``rx_ns`` to receive stamps (a protocol, a per-connection record)."""

    rx_ns: int


def kernel_stamp(ancdata: list[tuple[int, int, bytes]]) -> int:
    """The ``perf_counter_ns`` time of the ``SO_TIMESTAMPNS`` stamp in ``ancdata``.

    Without a stamp (the kernel gave none) it is now. The kernel's clock is
    ``CLOCK_REALTIME``; the offset to ``perf_counter_ns`` (``CLOCK_MONOTONIC`` on Linux)
    is read afresh each time, so a step of the wall clock costs at most one stamp, and a
    stamp is never later than now.
    """
    now = _perf()
    for level, kind, data in ancdata:
        if kind == SO_TIMESTAMPNS and level == _SOL_SOCKET and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            at = sec * 1_000_000_000 + nsec - (_wall() - _perf())
            return at if at < now else now
    return now


def _socket_transport(transport: asyncio.BaseTransport) -> Any:
    ssl_protocol = getattr(transport, "_ssl_protocol", None)
    if ssl_protocol is not None:
        return getattr(ssl_protocol, "_transport", None)
    return transport


def install(transport: asyncio.BaseTransport, holder: ArrivalHolder) -> bool:
    """Stamp every read of ``transport`` into ``holder.rx_ns``; False where it cannot.

    Call it from the protocol's ``connection_made``: the transport has not read yet.
    """
    raw = _socket_transport(transport)
    if not sys.platform.startswith("linux") or not _CMSG_SPACE or raw is None:
        return False
    sock = getattr(raw, "_sock", None)
    if not isinstance(sock, socket.socket) or not all(hasattr(raw, a) for a in _NEEDED):
        return False
    try:
        sock.setsockopt(_SOL_SOCKET, SO_TIMESTAMPNS, 1)
    except OSError:
        return False
    buffered = isinstance(raw.get_protocol(), asyncio.BufferedProtocol)
    raw._read_ready_cb = _reader(raw, sock, holder, buffered)
    return True


def _reader(
    raw: Any, sock: socket.socket, holder: ArrivalHolder, buffered: bool
) -> Callable[[], None]:
    # asyncio's _read_ready__data_received (or __get_buffer for a BufferedProtocol, such
    # as TLS), with recvmsg instead of recv and the stamp stored before delivery.
    def read_ready() -> None:
        if raw._conn_lost:
            return
        protocol = raw._protocol
        data = b""
        buf: Any = None
        if buffered:
            try:
                buf = protocol.get_buffer(-1)
                if not len(buf):
                    raise RuntimeError("get_buffer() returned an empty buffer")
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                raw._fatal_error(exc, "Fatal error: protocol.get_buffer() call failed.")
                return
        try:
            if buffered:
                nbytes, anc, _flags, _addr = sock.recvmsg_into([buf], _CMSG_SPACE)
            else:
                data, anc, _flags, _addr = sock.recvmsg(raw.max_size, _CMSG_SPACE)
                nbytes = len(data)
        except (BlockingIOError, InterruptedError):
            return
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            raw._fatal_error(exc, "Fatal read error on socket transport")
            return
        if not nbytes:
            raw._read_ready__on_eof()
            return
        holder.rx_ns = kernel_stamp(anc)
        try:
            if buffered:
                protocol.buffer_updated(nbytes)
            else:
                protocol.data_received(data)
        except (SystemExit, KeyboardInterrupt):
            raise
        except BaseException as exc:
            raw._fatal_error(exc, "Fatal error: protocol could not take the bytes read.")

    return read_ready
