"""The wire between a run and its dashboard: what each side says, framed on a socket.

The run's process sends a ``Hello`` once, then one ``LiveState`` each time the
dashboard has asked for one (``READY``: it has drawn the last), at most one per refresh
period; the last state carries the run's ``Ending``. The dashboard answers with
``READY`` and the keys' commands (``STOP``, ``ABORT``, ``PAUSE``). A message is a 4-byte
length and a pickle: both ends are this package, in two processes of one machine.
"""

from __future__ import annotations

import asyncio
import pickle
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from loadtest.config.scenario import Scenario
from loadtest.measure.merge import EncodedMetrics
from loadtest.tui.frame import RunVerdicts

__all__ = [
    "ABORT",
    "PAUSE",
    "READY",
    "STOP",
    "Command",
    "Ending",
    "Hello",
    "LiveState",
    "receive",
    "send",
    "send_nowait",
]

Command = Literal["ready", "stop", "abort", "pause"]
READY: Command = "ready"
"""The dashboard drew the last state: the run may send the next."""
STOP: Command = "stop"
ABORT: Command = "abort"
PAUSE: Command = "pause"

_LENGTH = struct.Struct("!I")


@dataclass(frozen=True, slots=True)
class Hello:
    """What does not change during the run."""

    scenario: Scenario
    endpoint: str
    model: str
    run_dir: Path
    feeds: dict[str, object] = field(default_factory=dict)
    """The hooks' live feeds at the start (``LiveState.feeds``): the fault windows the
    timeline shows before the first state."""


@dataclass(frozen=True, slots=True)
class Ending:
    """The run's final verdicts: those its summary writes."""

    blocks: dict[str, object]
    """The merged blocks of those the hooks fed live (``RunHook.live_feed``; the
    ``faults`` windows' verdicts), by name."""
    verdicts: RunVerdicts


@dataclass(frozen=True, slots=True)
class LiveState:
    """The run as it is now, as cheap to take as the run's process can make it.

    The counters move with every request; the histograms change once a second (the
    runner's roll), so ``metrics`` is only there when they have.
    """

    elapsed_s: float
    phase: str
    """``warm-up``, ``measuring``, ``paused``, ``stopping`` or ``ended``."""
    measured: int
    in_flight: int
    outcomes: dict[str, int]
    errors: dict[str, int]
    rate_history: tuple[float, ...]
    token_rate_history: tuple[float, ...]
    ttft_p95_history: tuple[float, ...]
    metrics: EncodedMetrics | None
    """``encode_metrics`` of the dashboard's histograms, where they changed since the
    last state; None: keep the last."""
    feeds: dict[str, object] = field(default_factory=dict)
    """The hooks' live feeds (``RunHook.live_feed``), by block name: the fault rig's
    ``FaultFeed``, the scraper's samples taken since the last state (``server``)."""
    blocks: dict[str, tuple[object, ...]] = field(default_factory=dict)
    """Each summary block's parts so far (``RunHook.live_parts``), for its panel."""
    ending: Ending | None = None


async def send(writer: asyncio.StreamWriter, message: object) -> None:
    """Write one message; waits only while the socket's buffer is full."""
    writer.write(_framed(message))
    await writer.drain()


def send_nowait(writer: asyncio.StreamWriter, message: object) -> None:
    """Queue one small message (a command) without waiting."""
    writer.write(_framed(message))


async def receive(reader: asyncio.StreamReader) -> object | None:
    """The next message, or None once the other side has closed the link."""
    try:
        head = await reader.readexactly(_LENGTH.size)
        body = await reader.readexactly(_LENGTH.unpack(head)[0])
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    message: object = pickle.loads(body)
    return message


def _framed(message: object) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body
