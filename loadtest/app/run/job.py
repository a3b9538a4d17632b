"""One run, from options to the files on disk, for 1..N workers.

The one orchestrator: plan (``plan.plan_run``, every check a run makes, which
``--check`` prints) -> deployment (the user's endpoint, a managed target or the
built-in simulator) -> the load (in this process when there is one worker, in N worker
processes or Ray tasks otherwise) -> merge -> finish (summary, files, the printed
table). A single-process run is the N = 1 case, not a path of its own: everything but
the middle step is shared.
"""

from __future__ import annotations

import asyncio
import dataclasses
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from loadtest.app.deployment import Deployment, plan_deployment, serves_simulator
from loadtest.app.options import RunOptions, default_scenario_path
from loadtest.app.process.console import log, say, use_tui
from loadtest.app.process.inprocess import LocalRun, Prompts, run_in_process
from loadtest.app.run.plan import RunPlan, load_prompts, plan_run, prompt_counts
from loadtest.app.scale.coordinator import Coordinator, CoordinatorContext
from loadtest.app.scale.workers import run_workers, worker_configs
from loadtest.config.feature_specs import FAULTS
from loadtest.engine.blocks import join_parts, merge_blocks
from loadtest.engine.runner import RunConfig, RunOutcome, collect_parts
from loadtest.features.faults.load import HoldControl
from loadtest.features.workload import plan_lines
from loadtest.model.summary import RunExtra, Summary
from loadtest.report import build_summary, render_table, write_results
from loadtest.report.blocks import render_blocks
from loadtest.report.error_examples import common_errors
from loadtest.transport.client import discover_model
from loadtest.transport.side import SideHttp

if TYPE_CHECKING:
    from loadtest.app.process.live import LiveExport

__all__ = [
    "RunOptions",
    "check_job",
    "default_scenario_path",
    "finish_run",
    "run_job",
]


def check_job(options: RunOptions, endpoint: str | None = None) -> str:
    """The run's own checks (``plan_run``) and its prompts loaded, sending nothing;
    returns the plan, with what the run would warn about. ``endpoint``: what the
    endpoint line says instead (``ab``'s sides, which ``options`` does not hold)."""
    plan = plan_run(options)
    scenario, load = plan.scenario, plan.scenario.load
    counts = prompt_counts(scenario)
    shape = (
        f"closed loop, {load.concurrency} sessions"
        if load.mode == "closed"
        else f"{load.mode} arrivals at {load.rate:g}/s"
    )
    bound = f"{load.duration_s:g} s" if load.duration_s is not None else f"{load.requests} requests"
    t = scenario.timeouts
    warnings = sum(n.warn for n in plan.notes)
    lines = [
        f"scenario {scenario.name} ({scenario.path}): valid"
        + (f", {warnings} warning{'s' * (warnings > 1)} below" if warnings else ""),
        f"  load: {shape}, {bound}, warm-up {load.warmup_s:g} s",
        *(
            [f"  workers: {len(plan.splits)} {'Ray tasks' if options.ray else 'driver processes'}"]
            if plan.sharded
            else []
        ),
        "  sources (max_tokens: --max-tokens, over every prompt's own):"
        if scenario.max_tokens_override
        else "  sources:",
        *(
            f"    {s.kind}:{s.category} weight {s.weight:g}, max_tokens "
            f"{scenario.max_tokens if s.max_tokens is None else s.max_tokens}"
            for s in scenario.sources
        ),
        "  prompts: not loaded here: cut with the endpoint's tokenizer once it is up"
        if counts is None
        else f"  prompts loaded: {', '.join(f'{k} {n}' for k, n in counts.items()) or 'none'}",
        f"  timeouts: total {t.total_s:g} s, first byte {t.first_byte_s:g} s, "
        f"between chunks {t.between_chunks_s:g} s, connect {t.connect_s:g} s",
        f"  endpoint: {endpoint or options.endpoint or 'the built-in simulator'}",
        f"  fault events: {len(FAULTS.of(scenario).events)}",
        *(
            f"    {e.label}: {e.kind} at {e.at_s:g} s"
            + (f" for {e.duration_s:g} s" if e.duration_s else "")
            for e in FAULTS.of(scenario).events
        ),
        f"  SLOs: {', '.join(f'{t.label} <= {t.limit:g}' for t in scenario.slo.thresholds)}"
        if scenario.slo.thresholds
        else "  SLOs: none",
        *plan_lines(scenario),
        *(f"  {'warning: ' if n.warn else ''}{n.text}" for n in plan.notes),
    ]
    return "\n".join(lines)


def run_job(options: RunOptions, live: LiveExport | None = None) -> tuple[Summary, Path, bool]:
    """Run a whole job; returns the summary, the run directory and whether it was stopped.

    ``live``: the command's live outputs, shown this run once a second and its end."""
    plan = plan_run(options)
    options = plan.options
    for note in plan.notes:
        say([note.text], warn=note.warn, label=options.label)
    log.debug("phase: planned (scenario, access, split, deployment, timeline)")
    deployment = plan_deployment(plan.scenario, options.endpoint, plan.run_dir)
    say(deployment.notes, label=options.label)
    # The prompts load in a thread while the simulator processes start: both take
    # about as long, and neither needs the other.
    loading = ThreadPoolExecutor(1, thread_name_prefix="loadtest-prompts")
    if live is not None:
        live_id = live_run_id(plan.run_dir, options.out)
        live.watch(
            live_id,
            plan.scenario,
            deployment.endpoint,
            plan.run_dir,
            options.live_labels,
            deployment.rig,
        )
    try:
        prompts = loading.submit(load_prompts, plan.scenario)
        if plan.sharded:
            ran = _run_workers(plan, deployment, prompts, live is not None)
        else:
            ran = run_in_process(
                plan.scenario,
                deployment,
                options,
                prompts,
                plan.run_dir,
                plan.tls,
                tui=use_tui(options.tui),
                live=live is not None,
            )
    finally:
        loading.shutdown(wait=False, cancel_futures=True)
        deployment.stop()
    loaded = prompts.result()
    extra: RunExtra = {"prompt_load_s": round(loaded.load_s, 3)}
    if plan.sharded:
        extra["workers"] = options.workers
    if ran.workers_lost:
        extra["workers_lost"] = list(ran.workers_lost)
    if ran.worker_lags:
        extra["worker_dispatch_lag"] = list(ran.worker_lags)
    if deployment.rig.initial_ready_s is not None:
        extra["target_time_to_ready_s"] = round(deployment.rig.initial_ready_s, 3)
    if serves_simulator(plan.scenario, options.endpoint):
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
    if live is not None:
        live.finish(ran.outcome.metrics, summary)
        (ran.config.run_dir / "live.json").unlink(missing_ok=True)  # the feed's, not a result
    log.debug("phase: results written")
    return summary, ran.config.run_dir, ran.outcome.interrupted


def live_run_id(run_dir: Path, out: str) -> str:
    """The run's id in the live outputs: its folder under the results folder, so that a
    sweep's step (``<sweep>/step-00-1``) or an ab's run is told from another sweep's."""
    try:
        return run_dir.resolve().relative_to(Path(out).resolve()).as_posix()
    except ValueError:
        return run_dir.name


def _run_workers(
    plan: RunPlan, dep: Deployment, prompts: Future[Prompts], live: bool = False
) -> LocalRun:
    """N > 1: the model is found here once; the load runs in N workers, merged; the fault
    rig (the plan's timeline, the scrape, the managed target) runs once, here."""
    sc, options = plan.scenario, plan.options
    prompts.result()  # the workers load their own; a data set error stops the job here
    dep.wait_ready()
    coordinator = Coordinator(dep.rig)
    try:
        coordinator.start()  # the proxy and the managed target, before any load
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
            simulated=serves_simulator(sc, options.endpoint),
        )
        plans = list(plan.splits)
        where = f"Ray tasks at {options.ray}" if options.ray else "driver processes"
        say([f"--workers {options.workers}: {len(plans)} {where}, merged"], label=options.label)
        # The dashboard reads the local workers' files; Ray workers keep theirs remote.
        dashboard = (dep.endpoint, model) if use_tui(options.tui) and not options.ray else None
        tls_spec = (options.ca_bundle, options.insecure)
        configs = worker_configs(base, plans)
        side = SideHttp(ssl=plan.tls, api_key=options.api_key, key_origin=dep.endpoint)

        def begin(start_wall: float) -> None:
            coordinator.begin(
                lambda t0_ns: CoordinatorContext(t0_ns, start_wall, plan.run_dir, sc, model, side),
                start_wall,
            )

        def hold_with(hold: HoldControl) -> None:
            dep.rig.on_hold = hold

        ran = run_workers(
            configs,
            plan.run_dir,
            tls_spec,
            options.ray,
            dashboard,
            options.label,
            begin,
            hold_with,
            live=live,
        )
    finally:
        coordinator.finish()
    judged = coordinator.result(plan.run_dir)  # on the merged requests.jsonl
    outcome = RunOutcome(
        metrics=ran.metrics,
        t0_ns=0,  # each worker's clock; nothing below compares them
        started_wall=ran.started_wall,
        duration_s=ran.duration_s,
        measured_s=ran.measured_s,
        interrupted=ran.interrupted,
        # The workers' parts, then the coordinator's (the rig's verdicts, the scrape).
        blocks=join_parts(ran.blocks, collect_parts([judged.blocks])),
    )
    return LocalRun(
        dataclasses.replace(base, tls=True), outcome, ran.stale_retries, ran.lost, ran.lags
    )


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
    workers): its blocks merged from every part the run handed in (``engine.blocks``)."""
    blocks = merge_blocks(outcome.blocks, outcome.metrics)
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
        blocks=blocks,
        stale_retries=stale_retries,
    )
    write_results(cfg.run_dir, summary, outcome.metrics, blocks)
    if not show:
        return summary
    # The results table is the product: stdout, whatever the log level; then each
    # block's own section (agent tasks, replayed sessions, fault windows, a plugin's).
    # A failure class says what the server did, not only how often (read from the lines).
    errors = common_errors(cfg.run_dir) if summary["requests"]["errors"] else None
    print(render_table(summary, errors))
    for section in render_blocks(summary):
        print(section)
    print(f"\nresults: {cfg.run_dir}")
    return summary
