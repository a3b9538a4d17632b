"""Requests that reach the socket in the call that sends them, not one loop turn later.

aiohttp writes a request's body (with the headers, in one write) from a task. Python
3.12 can start a task eagerly, and aiohttp does so there; on 3.11 the task's first step
waits for the next turn of the event loop, behind every callback already queued. With
a thousand streams that turn is often a millisecond, and it lands in every TTFT: the
clock started when the send began.

``EagerRequest`` runs that first step at once, as 3.12 would: ``write_bytes`` steps the
body-writing coroutine until it first waits (for a small body: until the request is
written) and hands the task the rest. Nothing else about the request changes.
``self_check`` confirms aiohttp still writes the body from ``write_bytes`` as a
coroutine; if not, sessions use aiohttp's own request class (and a warning says so).
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Coroutine, Generator
from typing import Any

from aiohttp import ClientRequest

from loadtest._compat.checks import CompatCheck, warn_once

__all__ = ["EagerRequest", "eager_request_class", "self_check", "start_eagerly"]


class _Waiting:
    """Yields, once, the future a stepped coroutine is waiting on, to the task."""

    __slots__ = ("future",)

    def __init__(self, future: Any) -> None:
        self.future = future

    def __await__(self) -> Generator[Any, None, None]:
        yield self.future


async def _resume(coro: Coroutine[Any, Any, Any], waiting: Any) -> Any:
    # The task drives ``coro`` from where the eager step left it: each future it waits
    # on is passed up to the task, and whatever the task throws in (a cancellation)
    # is passed down.
    while True:
        try:
            await _Waiting(waiting)
        except BaseException as exc:
            try:
                waiting = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            waiting = coro.send(None)
        except StopIteration as stop:
            return stop.value


async def _finished(value: Any) -> Any:
    return value


async def _failed(exc: BaseException) -> Any:
    raise exc


def start_eagerly(coro: Coroutine[Any, Any, Any]) -> Coroutine[Any, Any, Any]:
    """Run ``coro`` up to its first wait now; a coroutine that finishes the rest.

    Its outcome (value or exception) is delivered when the returned coroutine runs, as
    a task, exactly as if the whole of ``coro`` ran there.
    """
    try:
        waiting = coro.send(None)
    except StopIteration as stop:
        return _finished(stop.value)
    except BaseException as exc:  # delivered by the task, as it would have been
        return _failed(exc)
    return _resume(coro, waiting)


class EagerRequest(ClientRequest):
    """aiohttp's request, writing its body at once rather than one loop turn later."""

    def write_bytes(self, *args: Any, **kwargs: Any) -> Coroutine[Any, Any, None]:
        """Start writing now; the task that aiohttp makes of the result finishes it."""
        return start_eagerly(super().write_bytes(*args, **kwargs))


@functools.cache
def self_check() -> CompatCheck:
    """Whether aiohttp's request still writes its body from the coroutine overridden."""
    name = "eager_send"
    write = getattr(ClientRequest, "write_bytes", None)
    if write is None or not inspect.iscoroutinefunction(write):
        return CompatCheck(name, False, "ClientRequest.write_bytes is not a coroutine")
    if "write_bytes" not in ClientRequest.send.__code__.co_names:
        return CompatCheck(name, False, "ClientRequest.send no longer calls write_bytes")
    return CompatCheck(name, True, "ClientRequest.send starts write_bytes as a task")


def eager_request_class() -> type[ClientRequest]:
    """The request class for sessions: ``EagerRequest`` where Python starts tasks lazily."""
    if sys.version_info >= (3, 12):
        return ClientRequest  # aiohttp starts the task eagerly itself
    check = self_check()
    if not check.ok:
        warn_once(check)
        return ClientRequest
    return EagerRequest
