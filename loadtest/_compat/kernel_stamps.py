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

``self_check`` says whether this Python's transport is the one the reader was written
against (``VERIFIED_PYTHON``: the versions whose ``selector_events`` were read line by
line); elsewhere ``install`` declines, with a warning, and arrivals are stamped by the
loop (``arrival_clock`` says which clock each record used). ``set_protocol``, which
asyncio calls when a connection changes hands (``start_tls``, upgrades), resets the read
callback; ``install`` wraps it so the stamping reader follows the new protocol.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import struct
import sys
import time
from asyncio import selector_events
from collections.abc import Callable
from typing import Any, Protocol

from loadtest._compat.checks import CompatCheck, warn_once

__all__ = ["VERIFIED_PYTHON", "ArrivalHolder", "install", "kernel_stamp", "self_check"]

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
"""Linux's option number; Python's socket module does not name it."""
_CMSG_SPACE = socket.CMSG_SPACE(16) if hasattr(socket, "CMSG_SPACE") else 0
_TIMESPEC = struct.Struct("@qq")
_SOL_SOCKET = socket.SOL_SOCKET
_perf = time.perf_counter_ns
_wall = time.time_ns
_NEEDED = ("_read_ready_cb", "_conn_lost", "_fatal_error", "_read_ready__on_eof", "max_size")
VERIFIED_PYTHON = ((3, 11), (3, 13))
"""First and last Python (major, minor) whose asyncio socket transport the reader copies."""
_CLASS_PARTS = (
    "_read_ready",
    "_read_ready__data_received",
    "_read_ready__get_buffer",
    "_read_ready__on_eof",
    "_fatal_error",
    "set_protocol",
    "max_size",
)


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


@functools.cache
def self_check() -> CompatCheck:
    """Whether ``install`` may replace asyncio's read callback on this Python."""
    name = "kernel_stamps"
    if not sys.platform.startswith("linux") or not _CMSG_SPACE:
        return CompatCheck(name, False, f"no SO_TIMESTAMPNS on {sys.platform}")
    first, last = VERIFIED_PYTHON
    if not first <= sys.version_info[:2] <= last:
        version = f"{sys.version_info[0]}.{sys.version_info[1]}"
        return CompatCheck(name, False, f"asyncio of Python {version} not verified")
    cls = getattr(selector_events, "_SelectorSocketTransport", None)
    if cls is None:
        return CompatCheck(name, False, "asyncio has no _SelectorSocketTransport")
    missing = [a for a in _CLASS_PARTS if not hasattr(cls, a)]
    if missing:
        return CompatCheck(name, False, "_SelectorSocketTransport lacks " + ", ".join(missing))
    # The read dispatches through the callback, and set_protocol resets it: the two
    # facts the reader and the set_protocol wrapper rely on.
    for method in ("_read_ready", "set_protocol"):
        if "_read_ready_cb" not in getattr(cls, method).__code__.co_names:
            return CompatCheck(name, False, f"{method} no longer uses _read_ready_cb")
    return CompatCheck(name, True, "asyncio _SelectorSocketTransport read callback")


def _socket_transport(transport: asyncio.BaseTransport) -> Any:
    ssl_protocol = getattr(transport, "_ssl_protocol", None)
    if ssl_protocol is not None:
        return getattr(ssl_protocol, "_transport", None)
    return transport


def install(transport: asyncio.BaseTransport, holder: ArrivalHolder) -> bool:
    """Stamp every read of ``transport`` into ``holder.rx_ns``; False where it cannot.

    Call it from the protocol's ``connection_made``: the transport has not read yet.
    """
    check = self_check()
    if not check.ok:
        warn_once(check)
        return False
    raw = _socket_transport(transport)
    if raw is None:
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
    set_protocol = raw.set_protocol

    def stamped_set_protocol(protocol: asyncio.BaseProtocol) -> None:
        # asyncio's set_protocol puts its own read callback back; without this the
        # stamps would silently stop at the first change of protocol (start_tls).
        set_protocol(protocol)
        fresh = isinstance(protocol, asyncio.BufferedProtocol)
        raw._read_ready_cb = _reader(raw, sock, holder, fresh)

    raw.set_protocol = stamped_set_protocol
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
