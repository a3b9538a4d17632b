"""One ``loadtest run``: from a scenario and flags to the files on disk.

This is the glue between the pure parts and the edges: it resolves the endpoint
(starting the built-in simulator when none is given), loads prompts, runs the load with
or without the TUI, and writes the results. ``cli.py`` only parses arguments into
``RunOptions``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import signal
import ssl
import sys
import time
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loadtest.app.deployment import Deployment, plan_deployment, say
from loadtest.config.scenario import Scenario, load_scenario
from loadtest.datasets import PromptPool, build_pool
from loadtest.engine.runner import RunConfig, Runner, RunOutcome
from loadtest.errors import UsageError
from loadtest.features.agent.driver import AgentDriver
from loadtest.features.agent.taskspec import TaskPool, build_tasks
from loadtest.measure.slo import parse_slo_flag
from loadtest.model.summary import RunExtra, Summary
from loadtest.report import build_summary, render_faults, render_table, write_results
from loadtest.report.table import render_agent
from loadtest.transport.auth import AuthSpec, resolve_api_key, tls_context
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
class RunOptions:
    """The flags of ``loadtest run``; None means "as the scenario says"."""

    scenario: str | None = None
    endpoint: str | None = None
    model: str | None = None
    concurrency: int | None = None
    rate: float | None = None
    duration: float | None = None
    requests: int | None = None
    max_tokens: int | None = None
    warmup: float | None = None
    out: str = "out"
    seed: int | None = None
    tui: bool = True
    api_key: str | None = field(default=None, repr=False)
    """The key itself, for programmatic use; wins over ``api_key_env``/``api_key_file``."""
    api_key_env: str | None = None
    api_key_file: str | None = None
    ca_bundle: str | None = None
    insecure: bool = False
    record_outputs: bool = False
    temperature: float | None = None
    """Overrides the scenario's sampling temperature (``ab`` uses 0)."""
    workers: int = 1
    """Driver processes (``--workers``); their metrics are merged."""
    ray: str | None = None
    """``--ray ADDRESS`` (or ``auto``): the workers run as tasks on a Ray cluster."""
    slo: tuple[str, ...] = ()
    """``--slo`` values (``ttft_ms.p95=500``), on top of the scenario's ``[slo]``."""
    record_chunks: bool = False
    keepalive: bool = True
    uvloop: bool = False


def default_scenario_path() -> Path:
    """``scenarios/mixed.toml`` here, else the one beside the installed package."""
    local = Path("scenarios/mixed.toml")
    if local.exists():
        return local
    return Path(__file__).resolve().parents[2] / "scenarios" / "mixed.toml"


def apply_overrides(sc: Scenario, o: RunOptions) -> Scenario:
    """The scenario with command-line flags applied on top."""
    load = sc.load
    for flag, value in (("--rate", o.rate), ("--duration", o.duration), ("--warmup", o.warmup)):
        if value is not None and not math.isfinite(value):
            raise UsageError(f"{flag} must be a finite number, got {value}")
    if o.seed is not None and o.seed < 0:
        raise UsageError(f"--seed must be 0 or more, got {o.seed}")
    if o.warmup is not None and o.warmup < 0:
        raise UsageError(f"--warmup must be 0 or more, got {o.warmup:g}")
    if o.model is not None and not o.model.strip():
        raise UsageError("--model must not be empty")
    if o.rate is not None:
        if o.rate <= 0:
            raise UsageError("--rate must be positive")
        mode = load.mode if load.mode != "closed" else "poisson"
        load = dataclasses.replace(load, mode=mode, rate=o.rate, concurrency=o.concurrency or 0)
    elif o.concurrency is not None:
        if o.concurrency < 1:
            raise UsageError("--concurrency must be at least 1")
        load = dataclasses.replace(load, mode="closed", concurrency=o.concurrency)
    if o.duration is not None:
        if o.duration <= 0:
            raise UsageError("--duration must be positive")
        load = dataclasses.replace(load, duration_s=o.duration, requests=None)
    if o.requests is not None:
        if o.requests < 1:
            raise UsageError("--requests must be at least 1")
        # --duration and --requests exclude each other: a count ends the run alone.
        load = dataclasses.replace(load, requests=o.requests, duration_s=None)
    if o.warmup is not None:
        load = dataclasses.replace(load, warmup_s=o.warmup)
    changes: dict[str, Any] = {"load": load}
    if o.model is not None:
        changes["model"] = o.model
    if o.max_tokens is not None:
        if o.max_tokens < 1:
            raise UsageError("--max-tokens must be at least 1")
        changes["max_tokens"] = o.max_tokens
    if o.seed is not None:
        changes["seed"] = o.seed
    if o.temperature is not None:
        changes["sampling"] = {**sc.sampling, "temperature": o.temperature}
    if o.slo:
        extra = tuple(t for text in o.slo for t in parse_slo_flag(text))
        changes["slo"] = sc.slo.merged(extra)
    return dataclasses.replace(sc, **changes)


def _run_id(name: str) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.localtime()) + f"-{name}"


def _scenario(options: RunOptions) -> Scenario:
    if options.endpoint is not None:
        url = urllib.parse.urlsplit(options.endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise UsageError(
                f"--endpoint must be an http:// or https:// URL with a host, "
                f"e.g. http://127.0.0.1:8000; got {options.endpoint!r}"
            )
    path = Path(options.scenario) if options.scenario else default_scenario_path()
    return apply_overrides(load_scenario(path), options)


def _access(scenario: Scenario, options: RunOptions) -> tuple[str | None, ssl.SSLContext | bool]:
    """The API key and the TLS setting, from the options over the scenario's [auth]."""
    tls = tls_context(options.ca_bundle, options.insecure)
    if options.api_key is not None:
        return options.api_key, tls
    spec = AuthSpec(
        api_key_env=options.api_key_env or scenario.auth.api_key_env,
        api_key_file=options.api_key_file or scenario.auth.api_key_file,
    )
    return resolve_api_key(spec), tls


def _start_notes(scenario: Scenario, options: RunOptions, key: str | None) -> list[str]:
    load = scenario.load
    notes = []
    if scenario.bound_defaulted and options.duration is None and options.requests is None:
        notes.append(
            f"no duration or request count given: running {load.duration_s:g} s of load "
            "(set [load] duration_s or requests, or pass --duration or --requests)"
        )
    if options.insecure:
        notes.append("--insecure: the endpoint's TLS certificate is NOT verified")
    if key is not None:
        source = (
            "given"
            if options.api_key is not None
            else f"file {options.api_key_file or scenario.auth.api_key_file}"
            if options.api_key_file or scenario.auth.api_key_file
            else f"${options.api_key_env or scenario.auth.api_key_env}"
        )
        notes.append(f"API key: from {source}")
    return notes


def check_job(options: RunOptions) -> str:
    """Validate the scenario and flags without sending anything; returns the plan."""
    scenario = _scenario(options)
    key, _ = _access(scenario, options)
    load = scenario.load
    shape = (
        f"closed loop, {load.concurrency} sessions"
        if load.mode == "closed"
        else f"{load.mode} arrivals at {load.rate:g}/s"
    )
    bound = f"{load.duration_s:g} s" if load.duration_s is not None else f"{load.requests} requests"
    lines = [
        f"scenario {scenario.name} ({scenario.path}): valid",
        f"  load: {shape}, {bound}, warm-up {load.warmup_s:g} s",
        f"  sources: {', '.join(s.kind for s in scenario.sources)}",
        f"  endpoint: {options.endpoint or 'the built-in simulator'}",
        f"  fault events: {len(scenario.faults.events)}",
        f"  SLOs: {', '.join(f'{t.label} <= {t.limit:g}' for t in scenario.slo.thresholds)}"
        if scenario.slo.thresholds
        else "  SLOs: none",
        *(f"  {n}" for n in _start_notes(scenario, options, key)),
    ]
    return "\n".join(lines)


def run_job(options: RunOptions) -> tuple[Summary, Path, bool]:
    """Run a whole job; returns the summary, the run directory and whether it was stopped."""
    scenario = _scenario(options)
    key, tls = _access(scenario, options)
    say(_start_notes(scenario, options, key))
    options = dataclasses.replace(options, api_key=key)
    t_load = time.perf_counter()
    pool, counts = _load(scenario)
    prompt_load_s = time.perf_counter() - t_load
    run_dir = Path(options.out) / _run_id(scenario.name)
    if options.workers > 1 or options.ray is not None:
        from loadtest.app.workers import run_workers_job

        return run_workers_job(scenario, options, counts, run_dir, prompt_load_s)
    deployment = plan_deployment(scenario, options.endpoint, run_dir)
    say(deployment.notes)
    try:
        use_tui = options.tui and sys.stdout.isatty() and sys.stdin.isatty()
        runner_args = (scenario, deployment, options, pool, run_dir, tls)
        if use_tui:
            from loadtest.tui import run_with_tui

            runner, outcome = run_with_tui(lambda: _prepare(*runner_args))
        else:
            runner, outcome = _run_plain(lambda: _prepare(*runner_args), options.uvloop)
    finally:
        deployment.stop()
    extra: RunExtra = {"prompt_load_s": round(prompt_load_s, 3)}
    if deployment.rig.initial_ready_s is not None:
        extra["target_time_to_ready_s"] = round(deployment.rig.initial_ready_s, 3)
    summary = finish_run(runner.config, outcome, counts, extra, runner.stale_retries)
    return summary, runner.config.run_dir, outcome.interrupted


async def _prepare(
    scenario: Scenario,
    dep: Deployment,
    options: RunOptions,
    pool: PromptPool | TaskPool,
    run_dir: Path,
    tls: ssl.SSLContext | bool,
) -> Runner:
    try:
        await dep.rig.start()
        model = scenario.model or await discover_model(dep.endpoint, options.api_key, tls=tls)
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
    )
    if isinstance(pool, TaskPool):
        assert scenario.agent is not None
        agent = AgentDriver(scenario.agent, pool, scenario.seed)
        return Runner(cfg, None, rig=dep.rig, agent=agent)
    return Runner(cfg, pool, rig=dep.rig)


def _load(scenario: Scenario) -> tuple[PromptPool | TaskPool, dict[str, int]]:
    """The prompts of a scenario, or the tasks of an agent scenario, with counts."""
    if scenario.agent is None:
        return build_pool(scenario)
    tasks = build_tasks(scenario.tasks, scenario.seed)
    if not tasks.size:
        raise UsageError(f"{scenario.path}: the [[tasks]] sources hold no tasks")
    return tasks, {"tasks": tasks.size}


def _run_plain(
    prepare: Callable[[], Awaitable[Runner]], use_uvloop: bool
) -> tuple[Runner, RunOutcome]:
    async def main() -> tuple[Runner, RunOutcome]:
        runner = await prepare()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if not runner.stopping:
                print(
                    "\nstopping: waiting for in-flight requests (again to cancel them)",
                    file=sys.stderr,
                )
            runner.on_stop_signal()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        progress = asyncio.create_task(_progress(runner))
        try:
            return runner, await runner.run()
        finally:
            progress.cancel()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)

    if use_uvloop:
        try:
            import uvloop

            return uvloop.run(main())
        except ImportError:
            pass
    return asyncio.run(main())


async def _progress(runner: Runner) -> None:
    """One status line every 5 s on stderr, for terminals without the TUI and for CI logs."""
    while True:
        await asyncio.sleep(5)
        s = runner.snapshot()
        print(
            f"[{s.elapsed_s:6.1f}s] sent {s.sent} ok {s.ok} failed {s.failed} "
            f"in flight {s.in_flight}  {s.requests_per_s:.1f} req/s "
            f"{s.output_tokens_per_s:.0f} tok/s  TTFT p50 {s.ttft_p50_ms:.1f} ms "
            f"p99 {s.ttft_p99_ms:.1f} ms",
            file=sys.stderr,
        )


def finish_run(
    cfg: RunConfig,
    outcome: RunOutcome,
    counts: dict[str, int],
    extra: RunExtra,
    stale_retries: int,
) -> Summary:
    """Build, write and print the summary of a run (one process, or merged workers)."""
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
    print(render_table(summary))
    if "agent" in summary:
        print(render_agent(summary["agent"]))
    if summary.get("faults"):
        print(render_faults(summary.get("faults", [])))
    print(f"\nresults: {cfg.run_dir}")
    return summary
