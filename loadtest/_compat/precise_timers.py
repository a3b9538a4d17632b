"""An event loop whose timers wake on time, not on the next whole millisecond.

asyncio waits for I/O and timers in one ``epoll_wait``, whose timeout counts whole
milliseconds: ``selectors.EpollSelector`` rounds every timeout up to the next one. A
sleep to an arrival's intended send time therefore wakes 0-1 ms late, 0.5 ms on average,
before any other cost; with this loop a bare asyncio + aiohttp sender's dispatch lag
falls by most of that (``benchmarks/bench_dispatch.py``; docs/benchmarks.md).

The fix keeps epoll for the events and waits with ``select()``, whose timeout has
microseconds, on the epoll descriptor itself: it becomes readable when any registered
descriptor has an event. Then epoll is asked without waiting. It is asked without
waiting first too, so a busy loop that finds events already there makes one call, as
before. A wait that does wait costs two more calls, and a loop that wakes for each
timer on its own, instead of for all those due in the same millisecond, turns more
often: a bare sender spends more CPU per request (docs/benchmarks.md). Waiting the whole
milliseconds in epoll and only the rest in ``select()`` was tried and cost about as
much: most of that sender's waits end on their timer. Only public API is used
(``fileno()`` of the selector and ``select.select``), so nothing needs a self-check.

``select()`` cannot watch descriptors from 1,024 up (FD_SETSIZE): the loop's epoll
descriptor is made when the loop is, among the first a process opens, and if it is ever
that high the selector waits as epoll does. Other platforms' selectors (kqueue takes
nanoseconds) are used as they are.
"""

from __future__ import annotations

import asyncio
import select
import selectors
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["new_event_loop", "run"]

_T = TypeVar("_T")
_FD_SETSIZE = 1024
"""select()'s limit: descriptors from here up cannot be watched by it."""

if sys.platform == "linux":

    class PreciseEpollSelector(selectors.EpollSelector):
        """``EpollSelector`` whose timeouts keep their microseconds."""

        def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
            """Wait up to ``timeout`` seconds (µs resolution), then collect epoll's events."""
            if timeout is not None and timeout > 0 and self.fileno() < _FD_SETSIZE:
                # A busy loop mostly finds events already waiting: one call, as epoll's.
                ready = super().select(0)
                if ready:
                    return ready
                select.select([self.fileno()], [], [], timeout)
                timeout = 0
            return super().select(timeout)


def new_event_loop() -> asyncio.AbstractEventLoop:
    """A new event loop with precise timers where the platform needs them."""
    if sys.platform == "linux":
        return asyncio.SelectorEventLoop(PreciseEpollSelector())
    return asyncio.new_event_loop()


def run(main: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run`` on a loop from ``new_event_loop``."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)
