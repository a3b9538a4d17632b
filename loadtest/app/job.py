"""One run, from options to the files on disk, for 1..N workers.

The one orchestrator: plan (scenario, access, prompts) -> deployment (the user's
endpoint, a managed target or the built-in simulator) -> the load (in this process when
there is one worker, in N worker processes or Ray tasks otherwise) -> merge -> finish
(summary, files, the printed table). A single-process run is the N = 1 case, not a path
of its own: everything but the middle step is shared.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ssl
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from loadtest.app.console import log, say, use_tui
from loadtest.app.deployment import Deployment, plan_deployment
from loadtest.app.inprocess import LocalRun, Prompts, run_in_process
from loadtest.app.options import (
    RunOptions,
    apply_overrides,
    default_scenario_path,
    resolve_access,
    resolve_scenario,
    start_notes,
)
from loadtest.app.workers import check_splittable, run_workers, split_load, worker_configs
from loadtest.config.scenario import Scenario
from loadtest.datasets import build_pool
from loadtest.engine.runner import RunConfig, RunOutcome
from loadtest.errors import UsageError
from loadtest.features.agent.taskspec import build_tasks
from loadtest.features.workload import is_workload, plan_lines
from loadtest.model.summary import RunExtra, Summary
from loadtest.report import build_summary, render_faults, render_table, write_results
from loadtest.report.table import render_agent
from loadtest.transport.client import discover_model

__all__ = [
    "RunOptions",
    "apply_overrides",
    "check_job",
    "default_scenario_path",
    "finish_run",
    "run_job",
]


@dataclass(frozen=True, slots=True)
class _Plan:
    """Everything decided before anything is started."""

    scenario: Scenario
    options: RunOptions
    """With the resolved API key in ``api_key``."""
    run_dir: Path
    tls: ssl.SSLContext | bool


def check_job(options: RunOptions) -> str:
    """Validate the scenario and flags without sending anything; returns the plan."""
    scenario = resolve_scenario(options)
    key, _ = resolve_access(scenario, options)
    load = scenario.load
    shape = (
        f"closed loop, {load.concurrency} sessions"
        if load.mode == "closed"
        else f"{load.mode} arrivals at {load.rate:g}/s"
    )
    bound = f"{load.duration_s:g} s" if load.duration_s is not None else f"{load.requests} requests"
    t = scenario.timeouts
    lines = [
        f"scenario {scenario.name} ({scenario.path}): valid",
        f"  load: {shape}, {bound}, warm-up {load.warmup_s:g} s",
        "  sources (max_tokens: --max-tokens, over every prompt's own):"
        if scenario.max_tokens_override
        else "  sources:",
        *(
            f"    {s.kind}:{s.category} weight {s.weight:g}, max_tokens "
            f"{scenario.max_tokens if s.max_tokens is None else s.max_tokens}"
            for s in scenario.sources
        ),
        f"  timeouts: total {t.total_s:g} s, first byte {t.first_byte_s:g} s, "
        f"between chunks {t.between_chunks_s:g} s, connect {t.connect_s:g} s",
        f"  endpoint: {options.endpoint or 'the built-in simulator'}",
        f"  fault events: {len(scenario.faults.events)}",
        f"  SLOs: {', '.join(f'{t.label} <= {t.limit:g}' for t in scenario.slo.thresholds)}"
        if scenario.slo.thresholds
        else "  SLOs: none",
        *plan_lines(scenario),
        *(f"  {n.text}" for n in start_notes(scenario, options, key)),
    ]
    return "\n".join(lines)


def run_job(options: RunOptions) -> tuple[Summary, Path, bool]:
    """Run a whole job; returns the summary, the run directory and whether it was stopped."""
    plan = _plan(options)
    options = plan.options
    sharded = options.workers > 1 or options.ray is not None
    if sharded:
        check_splittable(plan.scenario)
    log.debug("phase: planned (scenario, access)")
    deployment = plan_deployment(plan.scenario, options.endpoint, plan.run_dir)
    say(deployment.notes, label=options.label)
    # The prompts load in a thread while the simulator processes start: both take
    # about as long, and neither needs the other.
    loading = ThreadPoolExecutor(1, thread_name_prefix="loadtest-prompts")
    try:
        prompts = loading.submit(_load, plan.scenario)
        if sharded:
            ran = _run_workers(plan, deployment, prompts)
        else:
            ran = run_in_process(
                plan.scenario,
                deployment,
                options,
                prompts,
                plan.run_dir,
                plan.tls,
                tui=use_tui(options.tui),
            )
    finally:
        loading.shutdown(wait=False, cancel_futures=True)
        deployment.stop()
    loaded = prompts.result()
    extra: RunExtra = {"prompt_load_s": round(loaded.load_s, 3)}
    if sharded:
        extra["workers"] = options.workers
    if deployment.rig.initial_ready_s is not None:
        extra["target_time_to_ready_s"] = round(deployment.rig.initial_ready_s, 3)
    if options.endpoint is None and plan.scenario.target is None:
        extra["simulated"] = True
    log.debug("phase: deployment stopped")
    summary = finish_run(
        ran.config,
        ran.outcome,
        loaded.counts,
        extra,
        ran.stale_retries,
        show=options.print_results,
    )
    log.debug("phase: results written")
    return summary, ran.config.run_dir, ran.outcome.interrupted


def _plan(options: RunOptions) -> _Plan:
    scenario = resolve_scenario(options)
    key, tls = resolve_access(scenario, options)
    for note in start_notes(scenario, options, key):
        say([note.text], warn=note.warn, label=options.label)
    if options.workers > 1 or options.ray is not None:
        # Checked before the prompts load: a bad split should not wait for data sets.
        split_load(scenario.load, options.workers, scenario.seed)
    return _Plan(
        scenario=scenario,
        options=dataclasses.replace(options, api_key=key),
        run_dir=Path(options.run_dir or Path(options.out) / _run_id(scenario.name)),
        tls=tls,
    )


def _run_id(name: str) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.localtime()) + f"-{name}"


def _load(scenario: Scenario) -> Prompts:
    """The prompts of a scenario, or the tasks of an agent scenario, with counts.

    None for a workload (synthetic lengths, a trace, conversations): its prompts need
    the endpoint's tokenizer, so they are built once the endpoint is up.
    """
    t0 = time.perf_counter()
    if is_workload(scenario):
        return Prompts(None, {}, time.perf_counter() - t0)
    if scenario.agent is None:
        pool, counts = build_pool(scenario)
        return Prompts(pool, counts, time.perf_counter() - t0)
    tasks = build_tasks(scenario.tasks, scenario.seed)
    if not tasks.size:
        raise UsageError(f"{scenario.path}: the [[tasks]] sources hold no tasks")
    return Prompts(tasks, {"tasks": tasks.size}, time.perf_counter() - t0)


def _run_workers(plan: _Plan, dep: Deployment, prompts: Future[Prompts]) -> LocalRun:
    """N > 1: the model is found here once; the load runs in N workers, merged."""
    sc, options = plan.scenario, plan.options
    prompts.result()  # the workers load their own; a data set error stops the job here
    dep.wait_ready()
    model = sc.model or asyncio.run(discover_model(dep.endpoint, options.api_key, tls=plan.tls))
    base = RunConfig(
        scenario=sc,
        endpoint=dep.endpoint,
        model=model,
        run_dir=plan.run_dir,
        api_key=options.api_key,
        record_chunks=options.record_chunks,
        keepalive=options.keepalive and sc.load.keepalive,
        record_outputs=options.record_outputs,
    )
    plans = split_load(sc.load, options.workers, sc.seed)
    where = f"Ray tasks at {options.ray}" if options.ray else "driver processes"
    say([f"--workers {options.workers}: {len(plans)} {where}, merged"], label=options.label)
    # The dashboard reads the local workers' files; Ray workers keep theirs remote.
    dashboard = (dep.endpoint, model) if use_tui(options.tui) and not options.ray else None
    tls_spec = (options.ca_bundle, options.insecure)
    configs = worker_configs(base, plans)
    ran = run_workers(configs, plan.run_dir, tls_spec, options.ray, dashboard, options.label)
    outcome = RunOutcome(
        metrics=ran.metrics,
        t0_ns=0,  # each worker's clock; nothing below compares them
        started_wall=ran.started_wall,
        duration_s=ran.duration_s,
        measured_s=ran.measured_s,
        interrupted=ran.interrupted,
    )
    return LocalRun(dataclasses.replace(base, tls=True), outcome, ran.stale_retries)


def finish_run(
    cfg: RunConfig,
    outcome: RunOutcome,
    counts: dict[str, int],
    extra: RunExtra,
    stale_retries: int,
    *,
    show: bool = True,
) -> Summary:
    """Build, write and print (``show``) the summary of a run (one process, or merged
    workers)."""
    summary = build_summary(
        run_id=cfg.run_dir.name,
        scenario=cfg.scenario,
        endpoint=cfg.endpoint,
        model=cfg.model,
        metrics=outcome.metrics,
        started_wall=outcome.started_wall,
        duration_s=outcome.duration_s,
        measured_s=outcome.measured_s,
        interrupted=outcome.interrupted,
        prompts=counts,
        extra=extra,
        faults=outcome.faults,
        server=outcome.server,
        agent=outcome.agent,
        stale_retries=stale_retries,
    )
    write_results(cfg.run_dir, summary, outcome.metrics)
    if not show:
        return summary
    # The results table is the product: stdout, whatever the log level.
    print(render_table(summary))
    if "agent" in summary:
        print(render_agent(summary["agent"], simulated=summary["run"].get("simulated", False)))
    if summary.get("faults"):
        print(render_faults(summary.get("faults", [])))
    print(f"\nresults: {cfg.run_dir}")
    return summary
