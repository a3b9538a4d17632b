"""One request in flight: its deadlines (swept by the client's watchdog) and planned cancels."""

from __future__ import annotations

import asyncio
import time
from typing import Any

__all__ = ["Flight", "InjectedCancel", "inject_cancel"]

_perf = time.perf_counter_ns


class Flight:
    __slots__ = (
        "cancel_after_tokens",
        "cancel_ns",
        "deadline_ns",
        "end_by_ns",
        "phase",
        "task",
        "timed_out",
    )

    def __init__(self, task: asyncio.Task[Any], deadline_ns: int, end_by_ns: int) -> None:
        self.task = task
        self.deadline_ns = deadline_ns
        self.end_by_ns = end_by_ns
        self.phase = "first byte"
        self.timed_out: str | None = None
        self.cancel_after_tokens: int | None = None
        self.cancel_ns: int | None = None


class InjectedCancel(Exception):
    """Raised inside the read loop when a planned mid-stream cancellation is due."""


def inject_cancel(flight: Flight) -> None:
    flight.cancel_ns = _perf()
    flight.task.cancel()
