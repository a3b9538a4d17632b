"""One worker, in this process: the N = 1 case of a run, with or without the dashboard.

Everything this package asks of the engine (``Runner``, ``run``, ``snapshot``,
``on_stop_signal``, ``RunOutcome``) is in this module, so the engine's interface can
change in one place.
"""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import ssl
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from loadtest._compat import precise_timers
from loadtest.app.deployment import Deployment, serves_simulator
from loadtest.app.options import RunOptions
from loadtest.app.process.assembly import edge_hooks, rig_hooks
from loadtest.app.process.console import Progress, log, stop_notice
from loadtest.config.feature_specs import AGENT
from loadtest.config.scenario import Scenario
from loadtest.datasets import PromptPool
from loadtest.engine.runner import RunConfig, Runner, RunOutcome
from loadtest.features.agent.driver import AgentDriver
from loadtest.features.agent.taskspec import TaskPool
from loadtest.features.workload import workload_for
from loadtest.model.summary import LostWorker, WorkerLag
from loadtest.transport.client import discover_model

if TYPE_CHECKING:
    from loadtest.tui import DashboardFeed

__all__ = ["LocalRun", "Prompts", "drive", "progress_of", "run_here", "run_in_process"]

_PROGRESS_EVERY_S = 5.0


@dataclass(frozen=True, slots=True)
class Prompts:
    """What a run sends: its prompts (or an agent's tasks), loaded beside the start-up."""

    pool: PromptPool | TaskPool | None
    """None for a workload: its prompts are built once the endpoint is up."""
    counts: dict[str, int]
    load_s: float


@dataclass(frozen=True, slots=True)
class LocalRun:
    """What the run in this process leaves for the finish: its config and outcome."""

    config: RunConfig
    outcome: RunOutcome
    stale_retries: int
    workers_lost: tuple[LostWorker, ...] = ()
    """Workers that died: their accounted requests are in the outcome, and listed here."""
    worker_lags: tuple[WorkerLag, ...] = ()
    """Each worker's own dispatch lag (a run with workers)."""


def run_in_process(
    scenario: Scenario,
    dep: Deployment,
    options: RunOptions,
    prompts: Future[Prompts],
    run_dir: Path,
    tls: ssl.SSLContext | bool,
    *,
    tui: bool,
    live: bool = False,
) -> LocalRun:
    """Start the rig, build the runner and run it here, in the dashboard when ``tui``.

    ``prompts`` may still be loading: the rig's target, the deployment's simulator
    processes and the prompts are waited for together. ``live``: write ``live.json``
    once a second for the live outputs (``app.process.live``).
    """

    async def prepare() -> Runner:
        try:
            pool = await _ready(dep, prompts)
            log.debug("phase: endpoint ready, prompts loaded")
            model = scenario.model or await discover_model(dep.endpoint, options.api_key, tls=tls)
            log.debug("phase: model %s", model)
        except BaseException:
            await dep.rig.close()
            raise
        cfg = RunConfig(
            scenario=scenario,
            endpoint=dep.endpoint,
            model=model,
            run_dir=run_dir,
            api_key=options.api_key,
            record_chunks=options.record_chunks,
            keepalive=options.keepalive and scenario.load.keepalive,
            tls=tls,
            record_outputs=options.record_outputs,
            simulated=serves_simulator(scenario, options.endpoint),
        )
        counts = prompts.result().counts
        if pool is None:  # a workload: its prompts are cut with the endpoint's tokenizer
            wl = await asyncio.to_thread(
                workload_for, scenario, dep.endpoint, model, options.api_key
            )
            assert wl is not None
            cfg = dataclasses.replace(cfg, scenario=wl.scenario)
            hooks = [*edge_hooks(cfg, counts), *rig_hooks(dep), *wl.hooks]
            return Runner(cfg, wl.pool, hooks=hooks, unit=wl.unit)
        if isinstance(pool, TaskPool):
            spec = AGENT.get(scenario)
            assert spec is not None
            agent = AgentDriver(spec, pool, scenario.seed)
            hooks = [*edge_hooks(cfg, counts), *rig_hooks(dep), agent]
            return Runner(cfg, None, hooks=hooks, unit=agent)
        return Runner(cfg, pool, hooks=[*edge_hooks(cfg, counts), *rig_hooks(dep)])

    if tui:
        from loadtest.tui import DashboardProcess

        live_dir = run_dir if live else None
        with DashboardProcess() as feed:
            runner, outcome = run_here(prepare, options.uvloop, feed, live_dir=live_dir)
    else:
        runner, outcome = run_here(
            prepare, options.uvloop, label=options.label, live_dir=run_dir if live else None
        )
    return LocalRun(runner.config, outcome, runner.stale_retries)


async def _ready(dep: Deployment, prompts: Future[Prompts]) -> PromptPool | TaskPool | None:
    """The rig started, the simulator processes listening and the prompts loaded."""
    steps = [
        asyncio.ensure_future(dep.rig.start()),
        asyncio.ensure_future(asyncio.to_thread(dep.wait_ready)),
    ]
    loaded = asyncio.wrap_future(prompts)
    try:
        await asyncio.gather(*steps, loaded)
    except BaseException:
        # The first failure is the one to report. Stopping the processes ends a
        # wait_ready still blocked in its thread, which asyncio.run would wait for.
        dep.stop()
        for step in steps:
            step.cancel()
        await asyncio.gather(*steps, return_exceptions=True)
        raise
    return loaded.result().pool


def progress_of(runner: Runner, label: str = "") -> Progress:
    """The progress line's counters from a runner's snapshot."""
    s = runner.snapshot()
    # The snapshot's percentiles are 0.0 while nothing was measured (none is ever 0.0).
    measured = s.ttft_p99_ms > 0
    return Progress(
        sent=s.sent,
        ok=s.ok,
        failed=s.failed,
        in_flight=s.in_flight,
        requests_per_s=s.requests_per_s,
        output_tokens_per_s=s.output_tokens_per_s,
        elapsed_s=s.elapsed_s,
        ttft_ms=(s.ttft_p50_ms, s.ttft_p99_ms) if measured else None,
        ttft_known=True,
        warmup=s.warmup,
        label=label,
    )


def run_here(
    prepare: Callable[[], Awaitable[Runner]],
    use_uvloop: bool,
    dashboard: DashboardFeed | None = None,
    label: str = "",
    live_dir: Path | None = None,
) -> tuple[Runner, RunOutcome]:
    """Build the runner and run it in this process's event loop, to the end (``drive``),
    with Ctrl-C and SIGTERM stopping it."""

    async def main() -> tuple[Runner, RunOutcome]:
        runner = await prepare()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if not runner.stopping and dashboard is None:
                stop_notice()
            runner.on_stop_signal()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        try:
            return runner, await drive(runner, dashboard, label, live_dir)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    if use_uvloop:
        try:
            import uvloop

            return uvloop.run(main())
        except ImportError:
            pass
    # Sends are due at microsecond times; the default loop wakes on whole milliseconds.
    return precise_timers.run(main())


async def drive(
    runner: Runner,
    dashboard: DashboardFeed | None = None,
    label: str = "",
    live_dir: Path | None = None,
) -> RunOutcome:
    """Run the load with one task beside it: the ``dashboard``'s feed (its own process
    draws), or without one a progress line every 5 s. The loop is the same either way.
    ``live_dir``: also write ``live.json`` there once a second (``app.process.live``)."""
    if dashboard is not None:
        await dashboard.open(runner)
    sides = [
        asyncio.create_task(
            _progress(runner, label) if dashboard is None else dashboard.serve(runner)
        )
    ]
    if live_dir is not None:
        from loadtest.app.process.live import write_live  # prometheus_client: only when asked

        sides.append(asyncio.create_task(write_live(runner, live_dir)))
    try:
        log.debug("phase: load starts")
        outcome = await runner.run()
        log.debug("phase: load done")
    finally:
        for side in sides:
            side.cancel()
        await asyncio.gather(*sides, return_exceptions=True)
    if dashboard is not None:
        await dashboard.finish(runner, outcome)
    return outcome


async def _progress(runner: Runner, label: str) -> None:
    """One status line every 5 s, for terminals without the TUI and for CI logs."""
    while True:
        await asyncio.sleep(_PROGRESS_EVERY_S)
        log.info("%s", progress_of(runner, label).line())
