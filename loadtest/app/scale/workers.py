"""``--workers N``: N driver processes, one event loop each, merged into one run.

The parent resolves the endpoint and the model, then starts N worker processes
(forked from a fork server that preloads their modules, or spawned: nothing of the
parent's event loop or sockets is inherited), each with its
share of the load: closed-loop sessions and request counts are divided; an open loop's
arrivals are shared out: each worker draws the whole plan from the run's seed and keeps
arrivals i, i+N, ... (``engine.schedule.arrival_offsets_ns``), so together they send
exactly what one process would, for any arrival process (re-drawing R/N in each worker
is exact for Poisson only: a sum of gamma processes is no gamma process), where a
duration bounds the run; a request count is split by position, exact without a warm-up
or an idle gap (one process counts from the first arrival after them).

All workers start at one instant, named once every worker has loaded its prompts and
is ready (a fixed delay let a worker with slower data sets start late, out of step with
the fault timeline); ``perf_counter_ns`` is the system's monotonic clock, the same in
every process. Each writes its own files under ``worker-<i>/`` and, at
its end, its metrics as encoded HdrHistograms; the parent adds them (exact), writes the
usual files of a run (merged ``requests.jsonl`` with a ``worker`` field, a merged
``histograms.hlog``, ``summary.json``) and prints the merged progress every 5 s.

Workers run in their own process group: a Ctrl-C reaches the parent only, which passes
each signal on exactly once (a second Ctrl-C then cancels in every worker).
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from loadtest._compat.forkserver import SIM_PRELOAD, fork_server
from loadtest.app.process.console import Progress, log, stop_notice
from loadtest.app.scale.coordinator import WorkerFilesHold
from loadtest.app.scale.worker_main import (
    READY,
    WorkerJob,
    WorkerResult,
    open_gate,
    read_result,
    recovered_result,
)
from loadtest.app.scale.worker_merge import merge_files, worker_lag
from loadtest.config.scenario import LoadSpec, Scenario
from loadtest.engine.blocks import join_parts
from loadtest.engine.runner import RunConfig
from loadtest.errors import EndpointError, UsageError
from loadtest.measure.recorders import Metrics
from loadtest.model.summary import LostWorker, WorkerLag
from loadtest.transport.sources import split_addresses

if TYPE_CHECKING:
    # Typing only: ForkServerContext exists only where the platform has a fork server.
    from multiprocessing.context import ForkServerContext, SpawnContext

    from loadtest.features.faults.load import HoldControl

__all__ = [
    "WorkerPlan",
    "WorkersRun",
    "run_workers",
    "split_load",
    "worker_configs",
]

_GO_MARGIN_S = 0.3
"""From naming the common start to it: the workers poll for it every 20 ms."""
_READY_TIMEOUT_S = 600.0
"""The longest the workers may take to load their prompts."""


@dataclasses.dataclass(frozen=True, slots=True)
class WorkerPlan:
    """What one worker runs."""

    index: int
    load: LoadSpec
    seed: int
    """The worker's own seed (its prompts); its arrivals are drawn from the run's."""
    share: tuple[int, int]
    """Open loop: ``(index, workers)``, which arrivals of the whole plan are its own."""


def split_load(load: LoadSpec, n: int, seed: int) -> list[WorkerPlan]:
    """The share of each of ``n`` workers; ``UsageError`` when it cannot be split."""
    if n < 1:
        raise UsageError("--workers must be at least 1")
    plans = []
    for i in range(n):
        changes: dict[str, Any] = {}
        if load.mode == "closed":
            share = load.concurrency // n + (i < load.concurrency % n)
            if share < 1:
                raise UsageError(
                    f"{load.concurrency} sessions cannot be split over {n} workers: "
                    "give each worker at least one (--concurrency >= --workers)"
                )
            changes["concurrency"] = share
        else:
            # The rate stays the whole plan's: each worker draws it and keeps its share.
            if load.concurrency:
                cap = load.concurrency // n + (i < load.concurrency % n)
                changes["concurrency"] = max(1, cap)
            if load.rate_ceiling:
                changes["rate_ceiling"] = load.rate_ceiling / n
        if load.source_addresses:
            # Each worker its own addresses: their ports are not shared between workers.
            changes["source_addresses"] = split_addresses(load.source_addresses, i, n)
        if load.requests is not None:
            share_r = load.requests // n + (i < load.requests % n)
            if share_r < 1:
                raise UsageError(f"{load.requests} requests cannot be split over {n} workers")
            changes["requests"] = share_r
        if load.stop_rules:
            # Each worker judges its own requests against its part of each rule.
            changes["stop_rules"] = tuple(
                dataclasses.replace(s, settings=s.rule().share(s.settings, i, n))
                for s in load.stop_rules
            )
        plans.append(WorkerPlan(i, dataclasses.replace(load, **changes), seed + 7919 * i, (i, n)))
    return plans


@dataclasses.dataclass(frozen=True, slots=True)
class WorkersRun:
    """The workers' merged metrics and the frame of the run they made together."""

    metrics: Metrics
    started_wall: float
    duration_s: float
    measured_s: float
    """The workers measured over one common window (they started together); the longest
    of their windows covers it. Clocks of other machines are not compared."""
    interrupted: bool
    stale_retries: int
    lost: tuple[LostWorker, ...] = ()
    """Workers that died before handing in results; their accounted lines are merged."""
    lags: tuple[WorkerLag, ...] = ()
    """Each worker's own dispatch lag, before the merge."""
    blocks: Mapping[str, tuple[object, ...]] = dataclasses.field(default_factory=dict)
    """Every worker's parts of summary blocks, by block name, worker by worker (the
    agent's task counters, the conversation turns, a plugin's own...)."""


def worker_configs(base: RunConfig, plans: list[WorkerPlan]) -> list[RunConfig]:
    """Each worker's config: its share of the load, its seed, its own folder."""
    return [
        dataclasses.replace(
            base,
            scenario=dataclasses.replace(base.scenario, load=p.load, seed=p.seed),
            run_dir=base.run_dir / f"worker-{p.index}",
            tls=True,  # each worker builds its own context (WorkerJob.tls)
            arrival_share=p.share,
            arrival_seed=base.scenario.seed,
        )
        for p in plans
    ]


_PRELOAD = (
    "loadtest.app.scale.worker_main",
    "loadtest.app.process.assembly",
    "loadtest.datasets",
    "loadtest.engine.runner",
    "loadtest.features.workload",
    "loadtest.measure.merge",
    "loadtest.report.rebuild",
    "loadtest.transport.auth",
    *SIM_PRELOAD,
)
"""What a worker imports, imported once by the fork server: each worker forked from it
starts with them loaded (a 2-worker run of ``code``, 8 requests: 2.7-3.0 CPU-s on the
machine instead of 3.2-3.8 with a fresh interpreter per worker); and what a built-in
simulator forked from it imports (``SimProcess``: every one after a process's first)."""


def _start_context() -> ForkServerContext | SpawnContext:
    """A fork server where the platform has one, else ``spawn``.

    Either way a worker inherits nothing of the parent's event loop, threads or sockets:
    the fork server is a fresh interpreter (started once, by the first worker or the
    second simulator of this process: ``_compat.forkserver``), and workers are forked
    from it, not from the parent.
    """
    ctx = fork_server(*_PRELOAD)
    return multiprocessing.get_context("spawn") if ctx is None else ctx


def _worker_main(job: WorkerJob, environ: Mapping[str, str]) -> None:
    """Entry of a local worker process."""
    os.setpgrp()  # signals come from the parent only, once each
    # The fork server kept the environment it started with; a worker runs in the
    # parent's as it is now, as a spawned process would.
    os.environ.clear()
    os.environ.update(environ)
    from loadtest.app.scale.worker_main import local_gate, worker_run

    worker_run(job, local_gate(Path(job.config.run_dir)))


def run_workers(
    configs: list[RunConfig],
    run_dir: Path,
    tls: tuple[str | None, bool],
    ray_address: str | None = None,
    dashboard: tuple[str, str] | None = None,
    label: str = "",
    on_start_wall: Callable[[float], None] | None = None,
    hold_with: Callable[[HoldControl], None] | None = None,
    live: bool = False,
) -> WorkersRun:
    """Run the workers (local processes, or Ray tasks), wait, merge.

    ``configs`` are the workers' ``RunConfig``s (each with its own ``run_dir``);
    ``dashboard`` (endpoint, model) shows the merged dashboard while local workers run;
    ``label`` starts their progress lines (``Progress.label``); ``on_start_wall`` is
    told the workers' common start (wall clock) before they are started; ``hold_with``
    is handed how to hold the workers' load (``hold(down)``, the fault rig's
    ``on_hold``) before the start: files for local workers, the control actor on Ray;
    with ``live`` each worker's ``live.json`` is in its folder here (``app.process.live``)."""
    from loadtest.measure.merge import merge_metrics

    if ray_address is not None:
        from loadtest.app.scale.ray_backend import run_on_ray

        results = run_on_ray(configs, tls, ray_address, stop_notice, on_start_wall, hold_with, live)
        lost: list[LostWorker] = []  # a lost Ray task fails the run (ray.get raises)
    else:
        if hold_with is not None:
            hold_with(WorkerFilesHold([Path(c.run_dir) for c in configs]))
        results, lost = _run_local(configs, tls, dashboard, label, on_start_wall, live)
    scenario: Scenario = configs[0].scenario
    merged = merge_metrics(
        [r.metrics for r in results],
        closed_loop=scenario.load.mode == "closed",
        t0_ns=min(r.t0_ns for r in results),
    )
    started_wall = min(r.started_wall for r in results)
    merge_files([Path(c.run_dir) for c in configs], run_dir, started_wall)
    return WorkersRun(
        metrics=merged,
        started_wall=started_wall,
        duration_s=max(r.duration_s for r in results),
        measured_s=max(r.measured_s for r in results),
        interrupted=any(r.interrupted for r in results) or bool(lost),
        stale_retries=sum(r.stale_retries for r in results),
        lost=tuple(lost),
        blocks=join_parts(*(r.blocks for r in results)),
        lags=tuple(worker_lag(i, r, scenario) for i, r in enumerate(results)),
    )


def _run_local(
    configs: list[RunConfig],
    tls: tuple[str | None, bool],
    dashboard: tuple[str, str] | None = None,
    label: str = "",
    on_start_wall: Callable[[float], None] | None = None,
    live: bool = False,
) -> tuple[list[WorkerResult], list[LostWorker]]:
    ctx = _start_context()
    n = len(configs)
    procs = [
        ctx.Process(
            target=_worker_main,
            args=(
                WorkerJob(
                    cfg,
                    tls,
                    live=dashboard is not None or live,
                    index=i,
                    workers=n,
                    run_seed=configs[0].scenario.seed,  # worker 0 keeps the run's seed
                ),
                dict(os.environ),
            ),
            name=f"loadtest-worker-{i}",
        )
        for i, cfg in enumerate(configs)
    ]
    for proc in procs:
        proc.start()
    presses = {"n": 0}

    def forward(sig: int, _frame: Any) -> None:
        presses["n"] += 1
        if presses["n"] == 1 and sig == signal.SIGINT:
            stop_notice()
        for proc in procs:
            if proc.pid is not None and proc.is_alive():
                os.kill(proc.pid, sig)

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        dirs = [Path(c.run_dir) for c in configs]
        _await_ready(dirs, procs, presses)
        start_wall = time.time() + _GO_MARGIN_S
        if on_start_wall is not None:
            on_start_wall(start_wall)
        open_gate(dirs, start_wall)
        if dashboard is not None:
            from loadtest.tui import Dashboard
            from loadtest.tui.workers_source import WorkersSource

            endpoint, model = dashboard
            source = WorkersSource(
                [Path(c.run_dir) for c in configs], configs[0].scenario, endpoint, model
            )
            Dashboard(
                watch=source,
                finished=lambda: not any(p.is_alive() for p in procs),
                on_stop=lambda: forward(signal.SIGINT, None),
            ).run()
        last = time.monotonic()
        while any(p.is_alive() for p in procs):
            for p in procs:
                p.join(0.2)
            if time.monotonic() - last >= 5:
                last = time.monotonic()
                _log_progress([Path(c.run_dir) for c in configs], label)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    results: list[WorkerResult] = []
    lost: list[LostWorker] = []
    for i, (cfg, proc) in enumerate(zip(configs, procs, strict=True)):
        path = Path(cfg.run_dir) / "result.json"
        if path.exists():
            results.append(read_result(path))
            continue
        if not (Path(cfg.run_dir) / "requests.jsonl").exists():
            raise EndpointError(
                f"worker {i} ended (exit {proc.exitcode}) before it sent anything; "
                f"see {cfg.run_dir}"
            )
        # Died (a SIGKILL, the OOM killer): what it accounted is on disk, line by line.
        result, torn = recovered_result(cfg, proc.exitcode)
        results.append(result)
        lost.append(
            {"worker": i, "exit": proc.exitcode, "requests": result.lines, "torn_lines": torn}
        )
        log.warning(
            "worker %d died (exit %s) before handing in its results: its %d accounted "
            "requests are merged from %s; requests it had in flight are not known",
            i,
            proc.exitcode,
            result.lines,
            Path(cfg.run_dir) / "requests.jsonl",
        )
    if not results:
        raise EndpointError("every worker died before handing in results")
    t0 = min((r.t0_ns for r in results if r.t0_ns), default=0)
    wall = min((r.started_wall for r in results if r.started_wall), default=time.time())
    # A recovered worker's clock frame is the others' (they started together).
    results = [
        dataclasses.replace(r, t0_ns=t0, started_wall=wall) if not r.t0_ns else r for r in results
    ]
    return results, lost


def _await_ready(dirs: list[Path], procs: list[Any], presses: dict[str, int]) -> None:
    """Until every worker is ready (prompts loaded), one has died, or a stop came."""
    t0 = time.monotonic()
    while not all((d / READY).exists() for d in dirs):
        if presses["n"] or not all(p.is_alive() for p in procs):
            return
        if time.monotonic() - t0 > _READY_TIMEOUT_S:
            log.warning("workers not ready after %g s: starting those that are", _READY_TIMEOUT_S)
            return
        time.sleep(0.02)


def _log_progress(dirs: list[Path], label: str) -> None:
    states = []
    for d in dirs:
        try:
            states.append(orjson.loads((d / "progress.json").read_bytes()))
        except (OSError, orjson.JSONDecodeError):
            continue
    if not states:
        return
    total = {k: sum(s[k] for s in states) for k in states[0]}
    progress = Progress(
        sent=total["sent"],
        ok=total["ok"],
        failed=total["failed"],
        in_flight=total["in_flight"],
        requests_per_s=total["rate"],
        output_tokens_per_s=total["tok_rate"],
        workers=len(states),
        label=label,
    )
    log.info("%s", progress.line())
