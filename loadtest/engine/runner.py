"""One load run: the loop that wires the schedule, the client, accounting and hooks.

What to offer and when is in ``loops`` (closed and open loop, grace, drain), when to
stop in ``stop`` (a pure rule), what a finished request becomes in ``accounting``.
Features (a fault plan, agent sessions, scraping, the interval log, GC policy, the
dashboard feed) attach as ``RunHook``s and see a ``RunContext``: the runner itself.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from loadtest.config.feature_specs import FAULTS
from loadtest.datasets.prompt import PromptPool
from loadtest.engine.accounting import Accounting
from loadtest.engine.hooks import RunHook, UnitOfLoad, overrides
from loadtest.engine.loops import closed_loop, open_loop
from loadtest.engine.outcome import RunConfig, RunOutcome
from loadtest.engine.request_unit import RequestUnit
from loadtest.engine.schedule import Clock, MonotonicClock
from loadtest.engine.stop import StopState, decide, measured_s, plan_stop
from loadtest.measure.recorders import Metrics, Snapshot
from loadtest.model.json import JsonObject
from loadtest.model.prompt import Prompt
from loadtest.model.record import RequestRecord
from loadtest.transport.client import Client, ClientConfig
from loadtest.transport.side import SideHttp

__all__ = ["RunConfig", "RunOutcome", "Runner", "collect_parts"]

_perf = time.perf_counter_ns
_H = TypeVar("_H", bound=RunHook)

_PAUSE_POLL_NS = 50_000_000


class _Feed(RunHook):
    """The ``on_record`` callback (the dashboard's feed) as a hook."""

    def __init__(self, callback: Callable[[RequestRecord], None]) -> None:
        self._callback = callback

    def on_record(self, rec: RequestRecord) -> None:
        """Hand the record on."""
        self._callback(rec)


class Runner:
    """One load run; ``stop()`` may be called from a signal handler or the TUI."""

    def __init__(
        self,
        config: RunConfig,
        pool: PromptPool | None,
        *,
        clock: Clock | None = None,
        on_record: Callable[[RequestRecord], None] | None = None,
        hooks: Sequence[RunHook] = (),
        unit: UnitOfLoad | None = None,
    ) -> None:
        self.config = config
        self.scenario = config.scenario
        self.load = config.scenario.load
        self.seed = config.scenario.seed if config.arrival_seed is None else config.arrival_seed
        self.pool = pool
        self.unit = unit
        """Runs each unit of load (an agent task); None: a request per unit."""
        self.clock: Clock = clock or MonotonicClock()
        all_hooks = list(hooks)
        if isinstance(unit, RunHook) and unit not in all_hooks:
            all_hooks.append(unit)
        if on_record is not None:
            all_hooks.append(_Feed(on_record))
        self.hooks: tuple[RunHook, ...] = tuple(all_hooks)
        self.closed_loop = self.load.mode == "closed"
        self.t0_ns = _perf()
        self.started_wall = time.time()
        self.start_gate: Callable[[], Awaitable[float]] | None = None
        """A worker's: says it is ready and waits for the common start (wall clock)."""
        self.metrics = Metrics(
            closed_loop=self.closed_loop,
            t0_ns=self.t0_ns,
            goodput_limits=self.scenario.slo.request_limits(),
        )
        self.accounting = Accounting(
            self.metrics,
            record_chunks=config.record_chunks,
            record_prompts=self.scenario.record_prompts,
        )
        self.stop_event = asyncio.Event()
        self.abort_event = asyncio.Event()
        self.extras: set[asyncio.Task[None]] = set()
        self.stale_retries = 0
        """Requests resent once because a pooled keep-alive connection had gone stale."""
        self.paused = False
        """True while the user has paused the load (the dashboard's ``p``)."""
        self._stop_signals = 0
        self._interrupted = False
        self._load_ended = False  # a stop rule's end_load; its hook keeps the reason
        self._client: Client | None = None
        self._next_index = 0
        self._measured = 0
        self._measured_open = 0
        self.measured_done = asyncio.Event()
        """Set once a count-bound plan's last measured unit has ended (warm-up may not)."""
        self._plan = plan_stop(self.load, self.t0_ns)
        # Per-request hook calls go only to the hooks that override them.
        self._idle_hooks = [h for h in self.hooks if overrides(h, "idle_until")]
        cancel_hooks = [h for h in self.hooks if overrides(h, "cancel_order")]
        if unit is None:
            assert pool is not None, "a request-per-unit run needs prompts"
            unit = RequestUnit(self.scenario, config.model, pool, cancel_hooks)
        self._unit: UnitOfLoad = unit
        self.accounting.feeds = tuple(h.on_record for h in self.hooks if overrides(h, "on_record"))

    # -- control -------------------------------------------------------------------------
    def stop(self) -> None:
        """Stop scheduling; in-flight requests get the grace period, then are cancelled."""
        self._interrupted = True
        self.stop_event.set()

    def end_load(self, reason: str) -> None:
        """A stop rule fired: no more units; in-flight ones get the grace period."""
        self._load_ended = True
        self.stop_event.set()

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
        self.abort_event.set()

    def toggle_pause(self) -> bool:
        """Pause or resume offering requests (in-flight ones go on); returns ``paused``.

        A pause is an idle gap the user asks for: nothing is offered, open-loop arrivals
        that fall in it are skipped, and it counts against the run's duration.
        """
        self.paused = not self.paused
        return self.paused

    # -- what the dashboard and the hooks read -------------------------------------------
    @property
    def stopping(self) -> bool:
        """True once the plan ended or ``stop()`` was called."""
        return self.stop_event.is_set()

    @property
    def warming_up(self) -> bool:
        """True before the warm-up has ended."""
        return _perf() < self._plan.warmup_end_ns

    def warming_up_at(self, ns: int) -> bool:
        """True when a unit intended at ``ns`` falls in the warm-up."""
        return ns < self._plan.warmup_end_ns

    @property
    def measured(self) -> int:
        """Measured (not warm-up) units sent so far."""
        return self._measured

    @property
    def in_flight(self) -> int:
        """Requests open in the client now."""
        return self._client.in_flight if self._client else 0

    @property
    def client(self) -> Client:
        """The open client (only while the run goes)."""
        assert self._client is not None, "the run has not started"
        return self._client

    @property
    def side_http(self) -> SideHttp:
        """How side requests (scrapes, hooks, tools) reach servers: the run's TLS and key."""
        return SideHttp(
            ssl=self.config.tls, api_key=self.config.api_key, key_origin=self.config.endpoint
        )

    @property
    def run_dir(self) -> Path:
        """Where the run's files go."""
        return self.config.run_dir

    @property
    def model(self) -> str:
        """The model name requests ask for."""
        return self.config.model

    @property
    def end_ns(self) -> int | None:
        """When the measured window ends, for a duration-bound run."""
        return self._plan.end_ns

    @property
    def arrival_start_ns(self) -> int:
        """Open loop: when the arrival schedule starts."""
        return self.t0_ns

    @property
    def arrival_share(self) -> tuple[int, int]:
        """Open loop: ``(i, n)``, this process keeps every n-th arrival from the i-th."""
        return self.config.arrival_share

    def hook(self, kind: type[_H]) -> _H | None:
        """The first attached hook of type ``kind`` (the dashboard finds the fault rig)."""
        return next((h for h in self.hooks if isinstance(h, kind)), None)

    def snapshot(self) -> Snapshot:
        """A read-only view of the run so far."""
        return self.metrics.snapshot(self.in_flight, self.warming_up)

    def account(self, rec: RequestRecord, prompt: Prompt, extra: JsonObject | None = None) -> None:
        """Count one finished request and write its line (``extra`` fields added)."""
        self.accounting.account(rec, prompt, extra)

    def burst(self, n: int) -> None:
        """Send ``n`` units now, beside the schedule (a fault's burst after idling)."""
        now = _perf()
        for _ in range(n):
            index = self.take_index(now)
            if index is None:
                return
            task = asyncio.create_task(self._extra_unit(index, now))
            self.extras.add(task)
            task.add_done_callback(self.extras.discard)

    async def _extra_unit(self, index: int, intended: int) -> None:
        await self.run_unit(index, intended)

    # -- what the loops ask ----------------------------------------------------------------
    def take_index(self, intended_ns: int) -> int | None:
        """The next unit's index, or None when the plan has ended (then stops the run)."""
        state = StopState(intended_ns, self._measured, self._interrupted or self._load_ended)
        decision = decide(self._plan, state)
        if not decision.go:
            self.stop_event.set()
            return None
        if decision.measured:
            self._measured += 1
        index = self._next_index
        self._next_index += 1
        return index

    def idle_until(self, now_ns: int) -> int | None:
        """When the load may go on, if ``now_ns`` falls in a pause or an idle gap."""
        if self.paused and not self.stopping:
            return max(now_ns, _perf()) + _PAUSE_POLL_NS
        for h in self._idle_hooks:
            if (until := h.idle_until(now_ns)) is not None:
                return until
        return None

    def cancelling_for(self, reason: str) -> None:
        """The loops are about to cancel in-flight units: their records say ``reason``."""
        self.accounting.cancel_reason = reason

    async def run_unit(self, index: int, intended_ns: int) -> float | None:
        """One unit of load: a request, or a whole task in an agent scenario."""
        if intended_ns < self._plan.warmup_end_ns:
            return await self._unit.run_unit(self, index, intended_ns)
        self._measured_open += 1
        try:
            return await self._unit.run_unit(self, index, intended_ns)
        finally:
            self._measured_open -= 1
            limit = self._plan.limit
            if not self._measured_open and limit is not None and self._measured >= limit:
                self.measured_done.set()

    # -- the run -------------------------------------------------------------------------
    async def run(self) -> RunOutcome:
        """Run the plan to its end (or until stopped) and return the metrics.

        Cancelling the task that awaits it cancels the in-flight requests, writes their
        records, finishes every hook, and then raises ``CancelledError`` as asyncio means.
        """
        run_dir = self.config.run_dir
        timers: list[asyncio.Task[None]] = []
        try:
            for h in self.hooks:
                h.before_start()  # before t0: its cost is not the run's time
            if self.start_gate is not None:
                # A worker: ready now; it starts with the others at the instant named.
                start_wall = await self.start_gate()
                await asyncio.sleep(max(0.0, start_wall - time.time()))
            self.started_wall = time.time()
            self.t0_ns = self.metrics.t0_ns = _perf()
            self._plan = plan_stop(self.load, self.t0_ns)
            run_dir.mkdir(parents=True, exist_ok=True)
            self.accounting.open(run_dir, self.t0_ns)
            async with Client(self._client_config()) as client:
                self._client = client
                for h in self.hooks:
                    await h.on_start(self)
                timers.append(asyncio.create_task(self._tick(), name="loadtest-ticker"))
                if self._plan.end_ns is not None:
                    timers.append(asyncio.create_task(self._stop_at(self._plan.end_ns)))
                await (closed_loop(self) if self.closed_loop else open_loop(self))
        finally:
            for t in timers:
                t.cancel()
            await asyncio.gather(*timers, return_exceptions=True)
            self._roll(_perf())
            # Every hook finishes and the file closes even when one hook fails.
            failures: list[Exception] = []
            for h in self.hooks:
                try:
                    await h.on_finish()
                except Exception as exc:
                    failures.append(exc)
            self.accounting.close()
            if self._client is not None:
                self.stale_retries = self._client.stale_retries
            self._client = None
            if failures:
                raise failures[0]
        return self._outcome(_perf())

    def _client_config(self) -> ClientConfig:
        sc = self.scenario
        load = self.load
        return ClientConfig(
            base_url=self.config.endpoint,
            api=sc.api,
            stream=sc.stream,
            timeouts=sc.timeouts,
            # Bursts of the fault plan come on top of the sessions or the in-flight cap.
            concurrency=load.concurrency + FAULTS.of(sc).extra_sessions if load.concurrency else 0,
            keepalive=self.config.keepalive,
            api_key=self.config.api_key,
            ssl=self.config.tls,
            keep_outputs=self.config.record_outputs,
            source_addresses=load.source_addresses,
        )

    def _outcome(self, end: int) -> RunOutcome:
        results = [h.result(self.config.run_dir) for h in self.hooks]
        m = self.metrics
        return RunOutcome(
            metrics=m,
            t0_ns=self.t0_ns,
            started_wall=self.started_wall,
            duration_s=(end - self.t0_ns) / 1e9,
            measured_s=measured_s(
                self._plan,
                closed_loop=self.closed_loop,
                first_intended_ns=m.measure_start_ns,
                last_end_ns=m.last_end_ns,
                end_ns=end,
            ),
            interrupted=self._interrupted,
            blocks=collect_parts(r.blocks for r in results),
        )

    async def _stop_at(self, end_ns: int) -> None:
        # The schedule's end comes by the clock, not when some unit next asks for an
        # index: sessions stuck in stalled requests would never ask.
        await self.clock.sleep_until(end_ns)
        self.stop_event.set()

    async def _tick(self) -> None:
        next_at = self.t0_ns
        while True:
            next_at += 1_000_000_000
            await self.clock.sleep_until(next_at)
            # Most of a roll is moving the second's values into histograms: done a
            # metric per loop turn, sends and reads go on in between.
            for _ in self.metrics.interval.flush_steps():
                await asyncio.sleep(0)
            self._roll(_perf())

    def _roll(self, now_ns: int) -> None:
        for h in self.hooks:
            h.on_tick(now_ns)
        interval, start_s, length_s = self.accounting.roll(now_ns)
        for h in self.hooks:
            h.on_interval(interval, start_s, length_s)


def collect_parts(
    given: Iterable[Mapping[str, object]],
) -> dict[str, tuple[object, ...]]:
    """Every part of each block, by block name, in the order given (hooks, workers)."""
    parts: dict[str, list[object]] = {}
    for blocks in given:
        for name, part in blocks.items():
            parts.setdefault(name, []).append(part)
    return {name: tuple(p) for name, p in parts.items()}
