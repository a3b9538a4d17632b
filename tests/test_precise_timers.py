"""The precise-timer loop: epoll for events, select() for microseconds (_compat.precise_timers)."""

from __future__ import annotations

import asyncio
import selectors
import socket
import sys
import time

import pytest

from loadtest._compat import precise_timers

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="epoll is Linux's")


def _selector() -> selectors.BaseSelector:
    return precise_timers.PreciseEpollSelector()


def test_events_come_back_with_and_without_a_timeout() -> None:
    a, b = socket.socketpair()
    sel = _selector()
    try:
        sel.register(a, selectors.EVENT_READ, "a")
        assert sel.select(0.0002) == []  # nothing yet: the short wait ends empty
        assert sel.select(0.0012) == []  # nor one past a millisecond
        b.send(b"x")
        for timeout in (5.0, 0.0012, None, 0):
            events = sel.select(timeout)
            assert [(key.data, mask) for key, mask in events] == [("a", selectors.EVENT_READ)]
    finally:
        sel.close()
        a.close()
        b.close()


def test_a_high_descriptor_waits_as_epoll_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # select() cannot watch descriptors at or over FD_SETSIZE: epoll waits instead.
    monkeypatch.setattr(precise_timers, "_FD_SETSIZE", 0)
    a, b = socket.socketpair()
    sel = _selector()
    try:
        sel.register(a, selectors.EVENT_READ, "a")
        assert sel.select(0.002) == []
        b.send(b"x")
        assert [key.data for key, _ in sel.select(5.0)] == ["a"]
    finally:
        sel.close()
        a.close()
        b.close()


def _shortest_wait_s(sel: selectors.BaseSelector, timeout: float, tries: int) -> float:
    best = float("inf")
    for _ in range(tries):
        t = time.perf_counter()
        sel.select(timeout)
        best = min(best, time.perf_counter() - t)
    return best


def test_a_sub_millisecond_wait_is_not_rounded_up_to_a_millisecond() -> None:
    # epoll counts whole milliseconds and never wakes before its timeout, so the default
    # selector's shortest 0.3 ms wait is at least 1 ms. Ours keeps the microseconds: of 50
    # waits at least one ends before a millisecond, however busy the machine.
    a, b = socket.socketpair()
    ours, default = _selector(), selectors.EpollSelector()
    try:
        for sel in (ours, default):
            sel.register(a, selectors.EVENT_READ)
        assert _shortest_wait_s(default, 0.0003, 5) >= 0.001
        assert _shortest_wait_s(ours, 0.0003, 50) < 0.001
        # Past a millisecond epoll waits the whole one, select() the remaining 0.3 ms.
        assert _shortest_wait_s(default, 0.0013, 5) >= 0.002
        assert 0.0013 <= _shortest_wait_s(ours, 0.0013, 50) < 0.002
    finally:
        ours.close()
        default.close()
        a.close()
        b.close()


def test_run_gives_the_coroutine_a_precise_loop_with_working_io_and_signals() -> None:
    async def main() -> tuple[bool, bytes, list[str]]:
        loop = asyncio.get_running_loop()
        precise = isinstance(getattr(loop, "_selector", None), precise_timers.PreciseEpollSelector)
        a, b = socket.socketpair()
        a.setblocking(False)
        order: list[str] = []
        loop.call_later(0.0004, order.append, "timer")
        loop.call_soon(b.send, b"ping")
        data = await loop.sock_recv(a, 4)
        await asyncio.sleep(0.002)
        a.close()
        b.close()
        return precise, data, order

    precise, data, order = precise_timers.run(main())
    assert precise
    assert data == b"ping"
    assert order == ["timer"]
