"""The fault rig: carries out a ``FaultPlan`` beside a run and observes what happened.

It owns the edges a fault needs (the managed target's process, the TCP fault proxy,
hook actions and the ``/metrics`` scraper), plays the timeline relative to the run's
start, once per run (on the coordinator of a run with workers). What acts on the load
itself (idle gaps, bursts, cancellations) is ``load.FaultLoad``, one per process of the
load; ``load_hook`` makes it. What it observed (actual window times,
time to ready, the running count settling after cancellations) goes to the verdicts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadtest.engine.hooks import CancelOrder, HookResult, RunContext, RunHook
from loadtest.features.faults.hooks import run_command, run_request
from loadtest.features.faults.load import FaultLoad
from loadtest.features.faults.plan import PROXY_TOXICS, FaultEvent, FaultPlan
from loadtest.features.faults.proxy import FaultProxy, Toxic
from loadtest.features.faults.target import ManagedTarget
from loadtest.features.faults.verdict import judge_windows
from loadtest.features.scrape import Scraper
from loadtest.features.server_summary import summarize_samples
from loadtest.model.io import JsonLines
from loadtest.model.json import JsonObject
from loadtest.model.summary import ServerBlock
from loadtest.model.verdict import FaultVerdict, Observed, RequestRow
from loadtest.transport.side import SideHttp

__all__ = ["CancelOrder", "FaultRig", "request_rows"]

_perf = time.perf_counter_ns

HOLD_LEAD_S = 0.06
"""How long a restart waits, after telling other processes' load to hold, before it
stops the target: three of their 20 ms looks."""


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
        self._down = False
        self.on_hold: Callable[[bool], None] | None = None
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
        t0_ns, run_dir, control = ctx.t0_ns, ctx.run_dir, ctx
        self.t0_ns = t0_ns
        self._http = ctx.side_http
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
            self._spawn(self._play(i, ev, control))

    async def on_finish(self) -> None:
        """The run is over: stop the timeline, the scraper, the target and the proxy."""
        try:
            await self.finish()
        finally:
            await self.close()

    def result(self, run_dir: Path) -> HookResult:
        """The verdicts per window and the server summary."""
        faults, server = self.judge(run_dir)
        return HookResult(faults=faults, server=server)

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

    # -- the load's part, and what it asks of the rig -----------------------------------
    def _set_down(self, down: bool) -> None:
        self._down = down
        if self.on_hold is not None:
            self.on_hold(down)

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

    # -- the timeline ---------------------------------------------------------------------
    def _spawn(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _sleep_to(self, at_s: float) -> None:
        delay = (self.t0_ns + int(at_s * 1e9) - _perf()) / 1e9
        if delay > 0:
            await asyncio.sleep(delay)

    def _rel_s(self) -> float:
        return round((_perf() - self.t0_ns) / 1e9, 4)

    async def _play(self, i: int, ev: FaultEvent, control: RunContext) -> None:
        obs = self.observed[i]
        try:
            await self._sleep_to(ev.at_s)
        except asyncio.CancelledError:
            # The run ended first; it does not wait for windows still to come.
            obs["not_reached"] = (
                f"not reached: the run ended at {self._rel_s():.1f} s, before the window "
                f"was due at {ev.at_s:g} s"
            )
            raise
        obs["start_s"] = self._rel_s()
        try:
            if ev.kind in PROXY_TOXICS:
                await self._toxic(ev, obs)
            elif ev.kind == "restart":
                await self._restart(ev, obs)
            elif ev.kind == "hook":
                obs["start_action"] = await self._hook(ev.command, ev.url, ev.method, ev.body)
                await self._sleep_to(ev.end_s)
                if ev.end_command or ev.end_url:
                    obs["end_action"] = await self._hook(
                        ev.end_command, ev.end_url, ev.method, ev.end_body
                    )
            elif ev.kind == "idle":
                await self._sleep_to(ev.end_s)
                obs["burst"] = ev.burst  # sent by the load's own hook (FaultLoad)
            elif ev.kind == "cancel":
                await self._sleep_to(ev.end_s)
                obs["end_s"] = self._rel_s()
                await self._settle(ev, obs, control)
        finally:
            obs.setdefault("end_s", self._rel_s())

    async def _toxic(self, ev: FaultEvent, obs: Observed) -> None:
        if self.proxy is None:
            obs["skipped"] = (
                "no fault proxy in front of a draft: set [faults].proxy_upstream to your "
                "draft's host:port, or run without --endpoint"
            )
            return
        toxic = Toxic(
            PROXY_TOXICS[ev.kind],
            latency_ms=ev.latency_ms,
            jitter_ms=ev.jitter_ms,
            bytes_per_s=ev.bytes_per_s,
        )
        await self.proxy.set(toxic)
        obs["start_s"] = self._rel_s()  # from when the toxic is on, not when it was due
        try:
            await self._sleep_to(ev.end_s)
        finally:
            await self.proxy.set(Toxic())
            obs["end_s"] = self._rel_s()

    async def _restart(self, ev: FaultEvent, obs: Observed) -> None:
        if self.target is None:
            obs["error"] = "no managed target to restart: add a [target] table"
            return
        self._set_down(True)
        if self.on_hold is not None:
            # Workers in other processes look every 20 ms: let every one hold before the
            # target stops, or their sessions spin through refused connections meanwhile.
            await asyncio.sleep(HOLD_LEAD_S)
        try:
            await self.target.stop(ev.signal)
            obs["stopped_s"] = self._rel_s()
            await self._sleep_to(ev.at_s + ev.down_s)
            spawned = self._rel_s()
            ready_s = await self.target.start()
        finally:
            self._set_down(False)
        obs["ready_s"] = self._rel_s()
        obs["time_to_ready_s"] = round(ready_s, 4)
        obs["spawned_s"] = spawned
        await self._sleep_to(ev.end_s)
        obs["end_s"] = max(self._rel_s(), obs["ready_s"])

    async def _hook(
        self, command: str | None, url: str | None, method: str, body: str
    ) -> JsonObject:
        if command:
            return await run_command(self._fill(command))
        assert url is not None
        return await run_request(self._fill(url), method, self._fill(body), http=self._http)

    def _fill(self, text: str) -> str:
        for key, value in self.placeholders.items():
            text = text.replace("{" + key + "}", value)
        return text

    async def _settle(self, ev: FaultEvent, obs: Observed, control: RunContext) -> None:
        """After the cancel window: does the endpoint let go of the cancelled streams?

        The endpoint never holds more requests than the client has open: every request
        it runs *or queues* is one the client still waits for. Running alone is not
        enough: with as many sessions as slots a leaked slot never makes running exceed
        in flight, it makes the client's next request wait in the queue instead. So the
        check is running + waiting <= in flight, within ``settle_s``.
        """
        if self.scraper is None:
            obs["settle"] = "not checked: the endpoint has no /metrics"
            return
        if not self.in_flight_known:
            obs["settle"] = "not checked: with --workers the open requests are split over processes"
            return
        t0 = time.perf_counter()
        excess = None
        while time.perf_counter() - t0 <= ev.settle_s:
            with contextlib.suppress(Exception):
                open_before = control.in_flight
                row = await self.scraper.sample()
                # The scrape read the server at some moment between these two counts.
                open_max = max(open_before, control.in_flight)
                if "running" in row:
                    held = row["running"] + row.get("waiting", 0)
                    excess = round(held - open_max)
                    if excess <= 0:
                        obs["settled_s"] = round(time.perf_counter() - t0, 4)
                        obs["running_excess"] = 0
                        return
            await asyncio.sleep(0.05)
        obs["settled_s"] = None
        obs["running_excess"] = excess


def request_rows(run_dir: Path) -> list[RequestRow]:
    """The fields of ``requests.jsonl`` the window verdicts read, one row per request.

    Only whole lines count: the dashboard reads the file while the run still writes it.
    """
    rows: list[RequestRow] = []
    path = run_dir / "requests.jsonl"
    if path.exists():
        # JsonLines leaves a last line being written (or torn by a kill) out.
        for r in JsonLines(path):
            rows.append(
                {
                    "sent_ms": r["sent_ms"],
                    "end_ms": r["end_ms"],
                    "first_token_ms": r.get("first_token_ms"),
                    "ttft_ms": r.get("ttft_ms"),
                    "tpot_ms": r.get("tpot_ms"),
                    "outcome": r["outcome"],
                    "warmup": bool(r.get("warmup")),
                    "error_class": r.get("error_class"),
                    "injected_cancel": r.get("injected_cancel"),
                    "cancel_close_ms": r.get("cancel_close_ms"),
                }
            )
    return rows
