"""Drives requests on the schedule and accounts for every one of them.

Closed loop: N sessions, each sending its next request when the last one ended (plus
think time). Open loop: one pacer sleeping to absolute deadlines, a task per arrival,
optionally capped by a concurrency limit and a rate ceiling. Either way, stopping (end
of plan, Ctrl-C, SIGTERM) stops scheduling, gives in-flight requests ``grace_s`` to end,
cancels the rest, and every request still ends as exactly one record on disk.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from loadtest._compat.quiet_gc import quiet_gc, settle
from loadtest.config.scenario import Scenario
from loadtest.datasets import Prompt, PromptPool
from loadtest.engine.schedule import ArrivalPlan, Clock, MonotonicClock, arrival_offsets_ns, pace
from loadtest.features.agent.driver import AgentDriver
from loadtest.features.faults.rig import FaultRig
from loadtest.measure.recorders import Metrics, Snapshot
from loadtest.model.record import RequestRecord
from loadtest.model.summary import AgentBlock, ServerBlock
from loadtest.model.verdict import FaultVerdict
from loadtest.protocol.openai import build_payload
from loadtest.report.atomic import LineLog
from loadtest.report.hlog import HlogWriter
from loadtest.transport.client import Client, ClientConfig

__all__ = ["RunConfig", "RunOutcome", "Runner"]

_perf = time.perf_counter_ns

_PAUSE_POLL_NS = 50_000_000
MAX_RETRY_AFTER_S = 30.0
"""The longest a closed-loop session waits when a 429 says Retry-After."""


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything a run needs beyond the scenario."""

    scenario: Scenario
    endpoint: str
    model: str
    run_dir: Path
    api_key: str | None = field(default=None, repr=False)
    record_chunks: bool = False
    keepalive: bool = True
    tls: ssl.SSLContext | bool = True
    """aiohttp's ``ssl=``: verify (True), trust a private CA (a context) or not (False)."""
    record_outputs: bool = False
    """Keep a digest and the head of every answer in requests.jsonl."""
    arrival_phase_ns: int = 0
    """Open loop: the arrival schedule starts this late (workers interleave their own)."""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What ``Runner.run`` hands to the report: metrics and the run's time frame."""

    metrics: Metrics
    t0_ns: int
    started_wall: float
    duration_s: float
    measured_s: float
    interrupted: bool
    faults: tuple[FaultVerdict, ...] = ()
    """One verdict entry per fault window (empty without a fault plan)."""
    server: ServerBlock | None = None
    """Scraped server metrics: acceptance rate and peaks (None when not scraped)."""
    agent: AgentBlock | None = None
    """Task-level figures of an agent scenario (None otherwise)."""


class Runner:
    """One load run; ``stop()`` may be called from a signal handler or the TUI."""

    def __init__(
        self,
        config: RunConfig,
        pool: PromptPool | None,
        *,
        clock: Clock | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
        rig: FaultRig | None = None,
        agent: AgentDriver | None = None,
    ) -> None:
        self.config = config
        self.agent = agent
        """Runs a task per unit of load in agent scenarios (None: a request per unit)."""
        self.scenario = config.scenario
        self.pool = pool
        self.clock = clock or MonotonicClock()
        self.on_record = on_record
        self.rig = rig
        self._extra: set[asyncio.Task[None]] = set()
        load = self.scenario.load
        self.closed_loop = load.mode == "closed"
        self.t0_ns = _perf()
        self.metrics = Metrics(
            closed_loop=self.closed_loop,
            t0_ns=self.t0_ns,
            goodput_limits=self.scenario.slo.request_limits(),
        )
        self._stop = asyncio.Event()
        self._stop_signals = 0
        self.stale_retries = 0
        """Requests resent once because a pooled keep-alive connection had gone stale."""
        self.paused = False
        """True while the user has paused the load (the dashboard's ``p``)."""
        self._abort = asyncio.Event()
        self._interrupted = False
        self._client: Client | None = None
        self._next_index = 0
        self._bodies: dict[int, bytes] = {}
        self._jsonl: LineLog | None = None
        self._hlog: HlogWriter | None = None
        # Encoding and compressing an interval's histograms takes ~2 ms a second; done
        # in one thread beside the loop (zlib lets go of the GIL), in order.
        self._hlog_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="loadtest-hlog")
        self._hlog_write: Future[None] | None = None
        self._warmup_end_ns = self.t0_ns + int(load.warmup_s * 1e9)
        self._end_ns: int | None = None
        self._limit: int | None = None
        self._measured = 0
        self._last_roll_ns = self.t0_ns

    # -- control -------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop scheduling; in-flight requests get the grace period, then are cancelled."""
        self._interrupted = True
        self._stop.set()

    def on_stop_signal(self) -> None:
        """Ctrl-C or SIGTERM: the first stops gracefully, any later one cancels at once."""
        self._stop_signals += 1
        if self._stop_signals == 1:
            self.stop()
        else:
            self.cancel_in_flight()

    def cancel_in_flight(self) -> None:
        """Stop at once: cancel in-flight requests without waiting out the grace period."""
        self.stop()
        self._abort.set()

    @property
    def stopping(self) -> bool:
        """True once the plan ended or ``stop()`` was called."""
        return self._stop.is_set()

    @property
    def warming_up(self) -> bool:
        """True before the warm-up has ended."""
        return _perf() < self._warmup_end_ns

    @property
    def measured(self) -> int:
        """Measured (not warm-up) requests sent so far."""
        return self._measured

    @property
    def in_flight(self) -> int:
        """Requests open in the client now."""
        return self._client.in_flight if self._client else 0

    def burst(self, n: int) -> None:
        """Send ``n`` requests now, beside the schedule (a fault's burst after idling)."""
        now = _perf()
        for _ in range(n):
            index = self._take_index(now)
            if index is None:
                return
            task = asyncio.create_task(self._one_task(index, now))
            self._extra.add(task)
            task.add_done_callback(self._extra.discard)

    def _idle_until(self, now_ns: int) -> int | None:
        if self.paused and not self._stop.is_set():
            return max(now_ns, _perf()) + _PAUSE_POLL_NS
        return self.rig.idle_until(now_ns) if self.rig is not None else None

    def toggle_pause(self) -> bool:
        """Pause or resume offering requests (in-flight ones go on); returns ``paused``.

        A pause is an idle gap the user asks for: nothing is offered, open-loop arrivals
        that fall in it are skipped, and it counts against the run's duration.
        """
        self.paused = not self.paused
        return self.paused

    async def _one_task(self, index: int, intended: int) -> None:
        await self._unit(index, intended)

    async def _unit(self, index: int, intended: int) -> float | None:
        """One unit of load: a request, or a whole task in an agent scenario.

        Returns the Retry-After of a rate-limited answer, if any.
        """
        if self.agent is not None:
            await self.agent.run(self, index, intended)
            return None
        rec = await self._one(index, intended)
        return rec.retry_after_s

    @property
    def client(self) -> Client:
        """The open client (only while the run goes)."""
        assert self._client is not None, "the run has not started"
        return self._client

    def warming_up_at(self, ns: int) -> bool:
        """True when a unit intended at ``ns`` falls in the warm-up."""
        return ns < self._warmup_end_ns

    def snapshot(self) -> Snapshot:
        """A read-only view of the run so far."""
        in_flight = self._client.in_flight if self._client else 0
        return self.metrics.snapshot(in_flight, _perf() < self._warmup_end_ns)

    # -- the run -------------------------------------------------------------------------
    async def run(self) -> RunOutcome:
        """Run the plan to its end (or until stopped) and return the metrics."""
        with quiet_gc():  # before t0: its first collection is not the run's time
            return await self._run()

    async def _run(self) -> RunOutcome:
        sc = self.scenario
        load = sc.load
        started_wall = time.time()
        self.t0_ns = _perf()
        self.metrics.t0_ns = self.t0_ns
        self._last_roll_ns = self.t0_ns
        self._warmup_end_ns = self.t0_ns + int(load.warmup_s * 1e9)
        if load.duration_s is not None:
            self._end_ns = self._warmup_end_ns + int(load.duration_s * 1e9)
        self._limit = load.requests
        run_dir = self.config.run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        # Buffered writes of a line per request; flushed once a second by the ticker.
        self._jsonl = LineLog(run_dir / "requests.jsonl")
        self._hlog = HlogWriter(run_dir / "histograms.hlog", started_wall)
        client_cfg = ClientConfig(
            base_url=self.config.endpoint,
            api=sc.api,
            stream=sc.stream,
            timeouts=sc.timeouts,
            # Bursts of the fault plan come on top of the sessions or the in-flight cap.
            concurrency=load.concurrency + sum(e.burst for e in sc.faults.events)
            if load.concurrency
            else 0,
            keepalive=self.config.keepalive,
            api_key=self.config.api_key,
            ssl=self.config.tls,
            keep_outputs=self.config.record_outputs,
        )
        ticker = asyncio.create_task(self._tick(), name="loadtest-ticker")
        try:
            async with Client(client_cfg) as client:
                self._client = client
                if self.rig is not None:
                    await self.rig.begin(self.t0_ns, self, run_dir)
                if self.agent is not None:
                    await self.agent.open(run_dir, self.t0_ns)
                if self.closed_loop:
                    await self._closed_loop()
                else:
                    await self._open_loop()
        finally:
            ticker.cancel()
            await asyncio.gather(ticker, return_exceptions=True)
            if self.rig is not None:
                await self.rig.finish()
                await self.rig.close()
            if self.agent is not None:
                await self.agent.close()
            self._roll()
            if self._hlog_write is not None:
                self._hlog_write.result()
            self._hlog_pool.shutdown(wait=True)
            self._hlog.close()
            self._jsonl.close()
            if self._client is not None:
                self.stale_retries = self._client.stale_retries
            self._client = None
        end = _perf()
        faults, server = self.rig.judge(run_dir) if self.rig is not None else ((), None)
        m = self.metrics
        measured_from = max(self._warmup_end_ns, m.measure_start_ns or self._warmup_end_ns)
        measured_to = m.last_end_ns or end
        return RunOutcome(
            metrics=m,
            t0_ns=self.t0_ns,
            started_wall=started_wall,
            duration_s=(end - self.t0_ns) / 1e9,
            measured_s=max(measured_to - measured_from, 1) / 1e9,
            interrupted=self._interrupted,
            faults=faults,
            server=server,
            agent=self.agent.summary(self) if self.agent is not None else None,
        )

    def _take_index(self, intended_ns: int) -> int | None:
        """The next request index, or None when the plan is exhausted."""
        if self._stop.is_set():
            return None
        if self._end_ns is not None and _perf() >= self._end_ns:
            self._stop.set()
            return None
        if intended_ns >= self._warmup_end_ns:
            if self._limit is not None and self._measured >= self._limit:
                self._stop.set()
                return None
            self._measured += 1
        index = self._next_index
        self._next_index += 1
        return index

    async def _one(self, index: int, intended_ns: int) -> RequestRecord:
        assert self._client is not None
        assert self.pool is not None, "a request-per-unit run needs prompts"
        prompt = self.pool.draw()
        order = self.rig.cancel_order(intended_ns) if self.rig is not None else None
        rec = await self._client.send(
            index=index,
            prompt=prompt,
            body=self._body(prompt),
            intended_ns=intended_ns,
            warmup=intended_ns < self._warmup_end_ns,
            cancel_after_tokens=order.after_tokens if order else None,
            cancel_after_ms=order.after_ms if order else None,
        )
        self.account(rec, prompt)
        return rec

    def _body(self, prompt: Prompt) -> bytes:
        body = self._bodies.get(id(prompt))
        if body is None:
            sc = self.scenario
            body = build_payload(
                api=sc.api,
                model=self.config.model,
                messages=list(prompt.messages),
                text=prompt.text,
                stream=sc.stream,
                max_tokens=prompt.max_tokens or sc.max_tokens,
                sampling=sc.sampling,
                tools=list(prompt.tools) or None,
            )
            self._bodies[id(prompt)] = body
        return body

    def account(
        self, rec: RequestRecord, prompt: Prompt, extra: dict[str, Any] | None = None
    ) -> None:
        """Count one finished request and write its line (``extra`` fields added)."""
        self.metrics.add(rec)
        assert self._jsonl is not None
        line: dict[str, Any] = rec.to_json(self.t0_ns)
        if extra:
            line.update(extra)
        if self.config.record_chunks:
            line["token_chunk_ms"] = [round((t - rec.sent_ns) / 1e6, 4) for t in rec.token_chunk_ns]
        if self.scenario.record_prompts:
            line["messages"] = list(prompt.messages)
        self._jsonl.write(orjson.dumps(line) + b"\n")
        if self.on_record is not None:
            self.on_record(rec)

    async def _closed_loop(self) -> None:
        load = self.scenario.load
        think_ns = int(load.think_time_ms * 1e6)
        n = load.concurrency
        ramp_ns = int(load.ramp_up_s * 1e9)
        sessions = [
            asyncio.create_task(
                self._session(think_ns, self.t0_ns + ramp_ns * i // n),
                name=f"loadtest-session-{i}",
            )
            for i in range(n)
        ]
        await self._drain(set(sessions))

    async def _session(self, think_ns: int, start_ns: int) -> None:
        # Sessions started together stay in step (a wave of sends, then a wave of first
        # tokens); a ramp spreads them out as real users would be.
        await self.clock.sleep_until(start_ns)
        intended = start_ns
        while True:
            while (idle_end := self._idle_until(intended)) is not None:
                # An idle gap of the fault plan: the users are away, nothing is offered.
                await self.clock.sleep_until(idle_end)
                intended = idle_end
            index = self._take_index(intended)
            if index is None:
                break
            retry_after = await self._unit(index, intended)
            intended = _perf() + think_ns
            if retry_after:
                # Told to come back later, a session waits as a well-behaved client does.
                intended += int(min(retry_after, MAX_RETRY_AFTER_S) * 1e9)
                if self._end_ns is not None:
                    intended = min(intended, self._end_ns)
            if intended > _perf():
                await self.clock.sleep_until(intended)

    async def _open_loop(self) -> None:
        tasks: set[asyncio.Task[None]] = set()
        pacer = asyncio.create_task(self._pace_arrivals(tasks), name="loadtest-pacer")
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait({pacer, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # Stopping may find the pacer asleep or waiting on the concurrency cap.
            pacer.cancel()
            stop.cancel()
            await asyncio.gather(pacer, stop, return_exceptions=True)
            self._stop.set()
            await self._drain(set(tasks))

    async def _pace_arrivals(self, tasks: set[asyncio.Task[None]]) -> None:
        load = self.scenario.load
        plan = ArrivalPlan(load.mode, load.rate, load.burstiness)
        cap = asyncio.Semaphore(load.concurrency) if load.concurrency > 0 else None
        ceiling: Any = None
        if load.rate_ceiling:
            from asyncio_throttle.throttler import Throttler

            # A ceiling only: it releases in bursts, so it never keeps the schedule.
            ceiling = Throttler(rate_limit=int(max(1, load.rate_ceiling)), period=1.0)
        async for _, intended in pace(
            arrival_offsets_ns(plan, self.scenario.seed),
            self.clock,
            start_ns=self.t0_ns + self.config.arrival_phase_ns,
            until_ns=self._end_ns,
        ):
            if self._idle_until(intended) is not None:
                continue  # an idle gap: arrivals in it are not offered
            if cap is not None:
                await cap.acquire()
            if ceiling is not None:
                await ceiling.acquire()
            index = self._take_index(intended)
            if index is None:
                if cap is not None:
                    cap.release()
                return
            task = asyncio.create_task(self._arrival(index, intended, cap))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    async def _arrival(self, index: int, intended: int, cap: asyncio.Semaphore | None) -> None:
        try:
            await self._unit(index, intended)
        finally:
            if cap is not None:
                cap.release()

    async def _drain(self, tasks: set[asyncio.Task[None]]) -> None:
        """Wait for the plan to end, then give in-flight work the grace period.

        If the run itself is cancelled (the TUI closed, the caller gave up), in-flight
        requests are cancelled and still recorded before the cancellation goes on.
        """
        try:
            await self._wait_then_cancel(tasks)
        except asyncio.CancelledError:
            self._interrupted = True
            self._stop.set()
            everything = tasks | self._extra
            for t in everything:
                t.cancel()
            await asyncio.gather(*everything, return_exceptions=True)
            raise

    async def _wait_then_cancel(self, tasks: set[asyncio.Task[None]]) -> None:
        waiter = asyncio.ensure_future(asyncio.wait(set(tasks)))
        stop = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({waiter, stop}, return_when=asyncio.FIRST_COMPLETED)
        stop.cancel()
        pending = {t for t in tasks | self._extra if not t.done()}
        if pending and not self._abort.is_set():
            rest = asyncio.ensure_future(asyncio.wait(pending))
            abort = asyncio.ensure_future(self._abort.wait())
            await asyncio.wait(
                {rest, abort},
                timeout=self.scenario.load.grace_s,
                return_when=asyncio.FIRST_COMPLETED,
            )
            for f in (rest, abort):
                f.cancel()
            await asyncio.gather(rest, abort, return_exceptions=True)
            pending = {t for t in pending if not t.done()}
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)

    async def _tick(self) -> None:
        next_at = self.t0_ns
        while True:
            next_at += 1_000_000_000
            await self.clock.sleep_until(next_at)
            # Most of a roll is moving the second's values into histograms: done a
            # metric per loop turn, sends and reads go on in between.
            for _ in self.metrics.interval.flush_steps():
                await asyncio.sleep(0)
            self._roll()
            settle()

    def _roll(self) -> None:
        if self._hlog_write is not None:
            # The set written last time is about to be cleared for reuse by the roll.
            self._hlog_write.result()
        now = _perf()
        start = self._last_roll_ns
        self._last_roll_ns = now
        interval = self.metrics.roll((now - start) / 1e9)
        if self._hlog is not None:
            self._hlog_write = self._hlog_pool.submit(
                self._hlog.write_interval,
                interval,
                (start - self.t0_ns) / 1e9,
                (now - start) / 1e9,
            )
        if self._jsonl is not None:
            self._jsonl.flush()
        if self.agent is not None:
            self.agent.flush()
