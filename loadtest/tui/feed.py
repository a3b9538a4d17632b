"""The run's side of the dashboard: a ``LiveState`` per refresh, when the dashboard asks.

Drawing happens in the dashboard's own process (``tui.process``): a Textual repaint
holds its event loop for tens of milliseconds, and in the run's loop that was every open
stream's client lag (``benchmarks/bench_tui.py``; docs/benchmarks.md, "Dashboard").
What is left here is taking the state: counters and histories (microseconds), and once a
second, after the runner's roll, the encoded histograms the dashboard shows and judges,
a histogram per loop turn (``encode_metrics_steps``), so that reads go on in between.
Percentiles, verdicts and the fault windows' judgement (which reads ``requests.jsonl``)
are the dashboard's work.

A state is only taken when the dashboard has drawn the last one: a slow dashboard gets
fewer states and costs the run nothing more. If it goes away, the run goes on without.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Generator
from typing import cast

from loadtest.engine.blocks import merge_blocks
from loadtest.engine.runner import Runner, RunOutcome, collect_parts
from loadtest.errors import UsageError
from loadtest.measure.merge import EncodedMetrics, encode_metrics_steps
from loadtest.report.summary import judge_run, judged_metrics
from loadtest.tui.frame import DASH_METRICS, RunVerdicts
from loadtest.tui.link import ABORT, PAUSE, READY, STOP, Ending, Hello, LiveState, receive, send

__all__ = ["REFRESH_S", "START_S", "DashboardFeed"]

REFRESH_S = 0.5
"""The shortest time between two states: two frames a second, as the dashboard drew
before it had a process of its own."""
START_S = 10.0
"""How long the load waits for the dashboard to be up, at most."""
_HISTORY = 120
"""Seconds of the rate and TTFT series the sparklines show."""

log = logging.getLogger("loadtest")


class DashboardFeed:
    """Feeds one run's states to a dashboard over ``sock`` (see the module docstring)."""

    def __init__(
        self, sock: socket.socket, refresh_s: float = REFRESH_S, close_s: float = 10.0
    ) -> None:
        self._sock = sock
        self.refresh_s = refresh_s
        self.close_s = close_s
        """How long ``finish`` waits for the dashboard to read the last state and go."""
        self.states = 0
        """States sent so far."""
        self._writer: asyncio.StreamWriter | None = None
        self._ready: asyncio.Event | None = None
        self._reading: asyncio.Task[None] | None = None
        self._rolls = -1
        self._names: set[str] = set()
        self._sent: dict[str, int] = {}
        """Of each feed that is a log, how many entries the dashboard has had; every feed
        name is a block whose final value the dashboard gets."""

    async def open(self, runner: Runner, wait_s: float = START_S) -> None:
        """Connect and say hello; wait (up to ``wait_s``) until the dashboard is up.

        The dashboard's start (a second of CPU for its imports) would otherwise take a
        core from the load's first seconds."""
        try:
            reader, self._writer = await asyncio.open_connection(sock=self._sock)
            hello = Hello(
                runner.scenario,
                runner.config.endpoint,
                runner.config.model,
                runner.run_dir,
                self._feeds(runner),
            )
            await send(self._writer, hello)
        except OSError as exc:
            log.debug("dashboard: no link (%s)", exc)
            self._writer = None
            return
        self._names = {*DASH_METRICS, *judged_metrics(runner.scenario.slo)}
        self._ready = asyncio.Event()
        self._reading = asyncio.create_task(self._commands(reader, runner))
        await self._until_ready(wait_s)

    async def serve(self, runner: Runner) -> None:
        """Send a state whenever the dashboard is ready for one, until cancelled."""
        if self._writer is None or self._ready is None or self._reading is None:
            return
        try:
            last = float("-inf")
            while await self._until_ready(None):
                self._ready.clear()
                await asyncio.sleep(max(0.0, last + self.refresh_s - time.monotonic()))
                last = time.monotonic()
                await send(self._writer, await self._state(runner, None))
                self.states += 1
        except OSError as exc:
            log.debug("dashboard: link lost (%s)", exc)

    async def finish(self, runner: Runner, outcome: RunOutcome) -> None:
        """Send the last state, with the verdicts the summary writes, and close the link."""
        writer = self._writer
        if writer is None:
            if self._reading is not None:
                self._reading.cancel()
                await asyncio.gather(self._reading, return_exceptions=True)
            self._sock.close()
            return
        driver, slo = judge_run(outcome.metrics, runner.scenario.slo, outcome.measured_s)
        feeds = self._feeds(runner)
        try:
            # The final values of the blocks shown from their feeds (the fault windows'
            # verdicts): the other blocks' panels have their parts.
            fed = {name: outcome.blocks.get(name, ()) for name in sorted(self._sent)}
            blocks = merge_blocks(fed, outcome.metrics)
        except UsageError as exc:  # the summary names it; the dashboard still closes
            log.debug("dashboard: no final blocks (%s)", exc)
            blocks = {}
        ending = Ending(blocks, RunVerdicts(slo, driver))
        try:
            await send(writer, await self._state(runner, ending, feeds))
            self.states += 1
            # Half-closed, and read until the dashboard goes: closed at once, a dashboard
            # still drawing the state before saw its next "ready" fail, and its transport
            # drop the last state unread (its last frame then said "measuring").
            writer.write_eof()
            if self._reading is not None:
                await asyncio.wait({self._reading}, timeout=self.close_s)
        except OSError as exc:
            log.debug("dashboard: link lost (%s)", exc)
        finally:
            if self._reading is not None:
                self._reading.cancel()
                await asyncio.gather(self._reading, return_exceptions=True)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _until_ready(self, timeout_s: float | None) -> bool:
        """Wait until the dashboard asks for a state (True), has gone, or ``timeout_s``."""
        assert self._ready is not None
        assert self._reading is not None
        if not self._ready.is_set() and not self._reading.done():
            asked = asyncio.create_task(self._ready.wait())
            try:
                await asyncio.wait(
                    (asked, self._reading), timeout=timeout_s, return_when="FIRST_COMPLETED"
                )
            finally:
                asked.cancel()
        return self._ready.is_set() and not self._reading.done()

    async def _commands(self, reader: asyncio.StreamReader, runner: Runner) -> None:
        assert self._ready is not None
        while (command := await receive(reader)) is not None:
            if command == READY:
                self._ready.set()
            elif command == STOP:
                runner.stop()
            elif command == ABORT:
                runner.cancel_in_flight()
            elif command == PAUSE:
                runner.toggle_pause()

    def _feeds(self, r: Runner) -> dict[str, object]:
        """The hooks' live feeds, each log cut to the entries not sent yet."""
        feeds: dict[str, object] = {}
        for hook in r.hooks:
            feeds.update(hook.live_feed())
        for name, value in feeds.items():
            sent = self._sent.setdefault(name, 0)
            if isinstance(value, list):
                new = tuple(value[sent:])
                feeds[name], self._sent[name] = new, sent + len(new)
        return feeds

    async def _state(
        self, r: Runner, ending: Ending | None, feeds: dict[str, object] | None = None
    ) -> LiveState:
        m = r.metrics
        metrics = None
        rolls = len(m.rate_history)
        if rolls != self._rolls or ending is not None:
            self._rolls = rolls
            metrics = await _stepped(encode_metrics_steps(m, self._names))
        phase = (
            "ended"
            if ending is not None
            else "paused"
            if r.paused
            else "stopping"
            if r.stopping
            else "warm-up"
            if r.warming_up
            else "measuring"
        )
        return LiveState(
            elapsed_s=(time.perf_counter_ns() - r.t0_ns) / 1e9 if r.t0_ns else 0.0,
            phase=phase,
            measured=r.measured,
            in_flight=r.in_flight,
            outcomes=dict(m.outcomes),
            errors=dict(m.errors),
            rate_history=tuple(m.rate_history[-_HISTORY:]),
            token_rate_history=tuple(m.token_rate_history[-_HISTORY:]),
            ttft_p95_history=tuple(m.ttft_p95_history[-_HISTORY:]),
            metrics=metrics,
            feeds=self._feeds(r) if feeds is None else feeds,
            blocks=collect_parts(h.live_parts() for h in r.hooks),
            ending=ending,
        )


async def _stepped(steps: Generator[None, None, EncodedMetrics]) -> EncodedMetrics:
    """Run ``steps`` to its end, letting the loop run between two of them."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return cast(EncodedMetrics, done.value)
        await asyncio.sleep(0)
