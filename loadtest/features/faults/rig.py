"""The fault rig: carries out a ``FaultPlan`` beside a run and observes what happened.

It owns the edges a fault needs (the managed target's process, the TCP fault proxy,
side requests and the ``/metrics`` scraper), and plays the timeline relative to the
run's start, once per run (on the coordinator of a run with workers): each window is
its kind's ``inject`` (``kind.FaultKind``, found by name in ``registry``), which sees
the rig through ``kind.Rig``. What acts on the load itself (idle gaps, bursts,
cancellations) is ``load.FaultLoad``, one per process of the load; ``load_hook`` makes
it. What it observed (actual window times, time to ready, the running count settling
after cancellations) goes to the verdicts.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from loadtest.engine.hooks import CancelOrder, HookResult, RunContext, RunHook
from loadtest.features.faults.kind import fault_kind
from loadtest.features.faults.live_windows import FaultFeed, request_rows
from loadtest.features.faults.load import FaultLoad, HoldControl
from loadtest.features.faults.plan import FaultEvent, FaultPlan
from loadtest.features.faults.proxy import FaultProxy, Toxic
from loadtest.features.faults.target import ManagedTarget
from loadtest.features.faults.verdict import judge_windows
from loadtest.features.scrape import Scraper
from loadtest.features.server_summary import summarize_samples
from loadtest.model.summary import ServerBlock
from loadtest.model.verdict import FaultVerdict, Observed
from loadtest.transport.side import SideHttp

__all__ = ["CancelOrder", "FaultRig"]

_perf = time.perf_counter_ns
log = logging.getLogger("loadtest")

HOLD_CONFIRM_S = 5.0
"""How long a restart waits for every worker to confirm the hold before it stops the
target anyway (a worker that has ended or died confirms nothing)."""
_CONFIRM_POLL_S = 0.01


class FaultRig(RunHook):
    """Plays one fault plan; ``observed[i]`` holds what happened in window ``i``."""

    def __init__(
        self,
        plan: FaultPlan,
        *,
        target: ManagedTarget | None = None,
        proxy: FaultProxy | None = None,
        metrics_url: str | None = None,
        placeholders: dict[str, str] | None = None,
        seed: int = 0,
    ) -> None:
        self.plan = plan
        self.target = target
        self.proxy = proxy
        self.metrics_url = metrics_url
        self.placeholders = dict(placeholders or {})
        self.scraper: Scraper | None = None
        self.observed: list[Observed] = [{} for _ in plan.events]
        self.initial_ready_s: float | None = None
        self.t0_ns = _perf()
        self.seed = seed
        self.in_flight_known = True
        """False on a coordinator of workers: no one count of open requests exists there,
        so the settling check after cancellations cannot be made."""
        self._tasks: set[asyncio.Task[None]] = set()
        self._http = SideHttp()
        self._control: RunContext | None = None
        self._down = False
        self.on_hold: HoldControl | None = None
        """Told when the load must hold (a restarted target is down) and when it may go
        on: how a coordinator reaches workers in other processes."""

    # -- before and after the run -------------------------------------------------------
    async def start(self) -> None:
        """Start the proxy and the managed target (in that order: the target may use it)."""
        if self.proxy is not None:
            await self.proxy.start()
            self.placeholders["proxy"] = self.proxy.url
        if self.target is not None:
            self.initial_ready_s = await self.target.start()

    async def on_start(self, ctx: RunContext) -> None:
        """Start the scraper and the timeline, relative to the run's ``t0_ns``."""
        t0_ns, run_dir = ctx.t0_ns, ctx.run_dir
        self.t0_ns = t0_ns
        self._http = ctx.side_http
        self._control = ctx
        if self.metrics_url:
            target = self.target
            self.scraper = Scraper(
                self.metrics_url,
                run_dir / "metrics.jsonl",
                interval_s=self.plan.scrape_interval_s,
                dcgm_url=self.plan.dcgm_url,
                pid=(lambda: target.pid) if target is not None else None,
                t0_ns=t0_ns,
                window_start_s=ctx.scenario.load.warmup_s,
                http=self._http,
            )
            await self.scraper.start()
        for i, ev in enumerate(self.plan.events):
            self._spawn(self._play(i, ev))

    async def on_finish(self) -> None:
        """The run is over: stop the timeline, the scraper, the target and the proxy."""
        try:
            await self.finish()
        finally:
            await self.close()

    def result(self, run_dir: Path) -> HookResult:
        """The verdicts per window (the ``faults`` block) and the scraped server summary
        (``server``, where the run scraped one)."""
        faults, server = self.judge(run_dir)
        return HookResult(
            blocks={"faults": list(faults)} | ({} if server is None else {"server": server})
        )

    async def finish(self) -> None:
        """Stop the timeline where it is (healing every toxic) and the scraper."""
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.proxy is not None:
            await self.proxy.set(Toxic())
        if self.scraper is not None:
            await self.scraper.close()

    async def close(self) -> None:
        """Stop the managed target and the proxy."""
        if self.target is not None:
            await self.target.close()
        if self.proxy is not None:
            await self.proxy.close()

    def judge(self, run_dir: Path) -> tuple[tuple[FaultVerdict, ...], ServerBlock | None]:
        """Verdicts per window and the server summary, from the rows on disk.

        Nothing per request was kept in memory: the rows are read back from
        ``requests.jsonl``, keeping only the fields the verdicts need
        (``request_rows``; the dashboard's process reads them too, for its provisional
        verdicts).
        """
        samples = self.scraper.samples if self.scraper is not None else []
        server = summarize_samples(samples) if self.scraper is not None else None
        if server is not None and self.scraper is not None and self.scraper.unavailable:
            server["note"] = self.scraper.unavailable
        if not self.plan.events:
            return (), server
        rows = request_rows(run_dir)
        return tuple(judge_windows(self.plan, self.observed, rows, samples)), server

    def live_feed(self) -> Mapping[str, object]:
        """Its plan and what it observed so far (``faults``), and the scraper's samples,
        the list it appends to (``server``: a log, of which a consumer takes what it has
        not had)."""
        samples: list[Any] = self.scraper.samples if self.scraper is not None else []
        feed = FaultFeed(self.plan, tuple(o.copy() for o in self.observed))
        return {"faults": feed, "server": samples}

    # -- the load's part, and what it asks of the rig -----------------------------------
    def is_down(self) -> bool:
        """Whether a restarted target is down or still loading now."""
        return self._down

    def load_hook(self, worker: int = 0, workers: int = 1, *, local: bool = True) -> FaultLoad:
        """The plan's part inside the load (idle gaps, bursts, cancellations) for one
        process of it; ``local``: in this process, so it holds while a restart is down."""
        return FaultLoad(
            self.plan,
            self.seed + 7919 * worker,
            worker=worker,
            workers=workers,
            hold=self.is_down if local else None,
        )

    # -- what a kind's inject sees (kind.Rig) -------------------------------------------
    @property
    def http(self) -> SideHttp:
        """The run's TLS and key, for side requests."""
        return self._http

    @property
    def control(self) -> RunContext:
        """The run, from ``on_start`` on."""
        assert self._control is not None, "the rig plays windows only after on_start"
        return self._control

    async def hold_load(self, down: bool) -> None:
        """Tell the load to hold (``down``) or go on; with workers in other processes,
        give each time to see it before a target stops."""
        self._down = down
        if self.on_hold is not None:
            self.on_hold(down)
            if down:
                # Workers in other processes look every 20 ms, later on a busy machine:
                # the target stops once every one holds, or their sessions spin through
                # refused connections.
                await self._confirmed(self.on_hold)

    @staticmethod
    async def _confirmed(control: HoldControl) -> None:
        deadline = _perf() + int(HOLD_CONFIRM_S * 1e9)
        while not await asyncio.to_thread(control.holding):
            if _perf() >= deadline:
                log.warning(
                    "faults: not every worker confirmed the hold within %g s; the "
                    "target stops anyway",
                    HOLD_CONFIRM_S,
                )
                return
            await asyncio.sleep(_CONFIRM_POLL_S)

    async def sleep_to(self, at_s: float) -> None:
        """Sleep until ``at_s`` seconds after the run's start."""
        delay = (self.t0_ns + int(at_s * 1e9) - _perf()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)

    def rel_s(self) -> float:
        """Seconds since the run's start, now."""
        return round((_perf() - self.t0_ns) / 1e9, 4)

    def fill(self, text: str) -> str:
        """``text`` with the deployment's placeholders filled in."""
        for key, value in self.placeholders.items():
            text = text.replace("{" + key + "}", value)
        return text

    # -- the timeline ---------------------------------------------------------------------
    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _play(self, i: int, ev: FaultEvent) -> None:
        obs = self.observed[i]
        try:
            await self.sleep_to(ev.at_s)
        except asyncio.CancelledError:
            # The run ended first; it does not wait for windows still to come.
            obs["not_reached"] = (
                f"not reached: the run ended at {self.rel_s():.1f} s, before the window "
                f"was due at {ev.at_s:g} s"
            )
            raise
        obs["start_s"] = self.rel_s()
        try:
            await fault_kind(ev.kind).inject(ev, obs, self)
        finally:
            obs.setdefault("end_s", self.rel_s())
