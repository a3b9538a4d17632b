"""What runs inside one worker (a local process or a Ray task): its share of the load.

``worker_run`` builds the prompts, waits for the common start (wall clock, so that it
also holds across machines), runs the ``Runner`` and returns its metrics as encoded
HdrHistograms, its own measured window, and, for workers on other machines, the
files of its folder (``requests.jsonl``, ``histograms.hlog`` and the side files its
hooks wrote: ``tasks.jsonl``, an agent's ``trace.json``, ...), which
the parent writes into the worker's folder there and merges as a local worker's. Stop
requests arrive as signals (local) or through ``stop_count`` (Ray).
"""

from __future__ import annotations

import asyncio
import dataclasses
import shutil
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from loadtest._compat import precise_timers
from loadtest.config.feature_specs import AGENT, TASKS
from loadtest.model.atomic import write_atomic

if TYPE_CHECKING:
    from loadtest.engine.runner import RunConfig, Runner
    from loadtest.features.faults.load import HoldChannel
    from loadtest.measure.merge import EncodedMetrics

__all__ = [
    "GO",
    "HOLD",
    "HOLD_ACK",
    "READY",
    "WorkerJob",
    "WorkerResult",
    "local_gate",
    "local_hold_line",
    "open_gate",
    "read_result",
    "recovered_result",
    "worker_run",
]


@dataclass(frozen=True, slots=True)
class WorkerJob:
    """What the parent hands one worker (pickled into a process or a Ray task)."""

    config: RunConfig
    tls: tuple[str | None, bool]
    """``(ca_bundle, insecure)``: an SSLContext does not cross process boundaries."""
    live: bool = False
    """Write ``live.json`` once a second for the parent's dashboard."""
    ship_files: bool = False
    """On another machine: return the files' contents, keep nothing on its disk."""
    index: int = 0
    """This worker's number, 0..workers-1 (its share of a fault's burst)."""
    workers: int = 1
    run_seed: int = 0
    """The run's own seed (each worker's scenario has its own): what orders a split."""


@dataclass(frozen=True, slots=True)
class WorkerResult:
    """One worker's end: encoded metrics, its time frame, and shipped files if asked."""

    metrics: EncodedMetrics
    t0_ns: int
    started_wall: float
    duration_s: float
    measured_s: float
    interrupted: bool
    stale_retries: int
    files: tuple[tuple[str, bytes], ...] | None = None
    """Shipped (``WorkerJob.ship_files``): each file of the worker's folder, by name."""
    lines: int = 0
    """A recovered worker's (``recovered_result``): the whole lines it had written."""
    blocks: dict[str, list[object]] = dataclasses.field(default_factory=dict)
    """Its hooks' parts of summary blocks, by block name (``RunOutcome.blocks``), as JSON:
    the parent merges them with every other worker's (``engine.blocks``)."""


READY, GO = "ready", "go.json"
"""A local worker's marker that it is ready, and the parent's answer with the start."""


def local_gate(run_dir: Path) -> Callable[[], float]:
    """``worker_run``'s ``start`` for a local worker: files in its own folder."""

    def start() -> float:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(run_dir / READY, b"")
        while True:
            try:
                return float(orjson.loads((run_dir / GO).read_bytes())["start_wall"])
            except (OSError, ValueError, KeyError):
                time.sleep(0.02)

    return start


def open_gate(run_dirs: list[Path], start_wall: float) -> None:
    """Name the common start to local workers waiting in ``local_gate``."""
    for d in run_dirs:
        d.mkdir(parents=True, exist_ok=True)
        write_atomic(d / GO, orjson.dumps({"start_wall": start_wall}))


def recovered_result(cfg: RunConfig, exitcode: int | None) -> tuple[WorkerResult, int]:
    """What a worker that died had accounted, from its requests.jsonl: its result (the
    clock fields zero, for the caller to set) and its torn lines."""
    from loadtest.measure.merge import encode_metrics
    from loadtest.report.rebuild import account_lines, line_blocks

    sc = cfg.scenario
    part = account_lines(
        Path(cfg.run_dir) / "requests.jsonl",
        sc.load.mode == "closed",
        sc.slo,
        sc.load.warmup_s,
    )
    result = WorkerResult(
        metrics=encode_metrics(part.metrics),
        t0_ns=0,
        started_wall=0.0,
        duration_s=part.duration_s,
        measured_s=part.measured_s,
        interrupted=True,
        stale_retries=0,
        lines=part.lines,
        blocks=line_blocks(part),
    )
    return result, part.torn


def read_result(path: Path) -> WorkerResult:
    """A local worker's ``result.json``."""
    return WorkerResult(**orjson.loads(path.read_bytes()))


def worker_run(
    job: WorkerJob,
    start: Callable[[], float],
    stop_count: Callable[[], int] | None = None,
    hold_line: HoldChannel | None = None,
    publish_live: Callable[[bytes], None] | None = None,
) -> WorkerResult:
    """Run one worker's share; returns its result (see the module docstring).

    ``start`` says this worker is ready (its prompts loaded, its runner built) and
    blocks until the parent names the common start, wall clock: the parent names it
    once every worker is ready, so that no worker starts late because its data sets
    took longer to load than another's (or than a fixed delay allowed). ``hold_line``
    reads whether the coordinator holds the load (a restarted target is down) and
    confirms that this worker holds; by default files in the worker's own folder
    (``HOLD``, ``HOLD_ACK``)."""
    from loadtest.measure.merge import encode_metrics
    from loadtest.transport.auth import tls_context

    ship = job.ship_files
    cfg = job.config
    if ship:  # on another machine: a scratch folder, shipped back and removed
        cfg = dataclasses.replace(cfg, run_dir=Path(tempfile.mkdtemp(prefix="loadtest-worker-")))
    # An SSLContext does not cross process boundaries: each worker builds its own.
    cfg = dataclasses.replace(cfg, tls=tls_context(*job.tls))
    run_dir = Path(cfg.run_dir)
    line = hold_line if hold_line is not None else local_hold_line(run_dir)

    async def main() -> WorkerResult:
        runner = await _build_runner(cfg, job, line)
        if stop_count is None:
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, runner.on_stop_signal)
        runner.start_gate = lambda: asyncio.to_thread(start)
        tasks = [asyncio.create_task(_progress(runner, run_dir, job.live, publish_live))]
        if stop_count is not None:
            tasks.append(asyncio.create_task(_poll_stop(runner, stop_count)))
        try:
            outcome = await runner.run()
        finally:
            for t in tasks:
                t.cancel()
        return WorkerResult(
            metrics=encode_metrics(outcome.metrics),
            t0_ns=outcome.t0_ns,
            started_wall=outcome.started_wall,
            duration_s=outcome.duration_s,
            measured_s=outcome.measured_s,
            interrupted=outcome.interrupted,
            stale_retries=runner.stale_retries,
            blocks={name: list(parts) for name, parts in outcome.blocks.items()},
        )

    result = precise_timers.run(main())
    if ship:
        # Every file, not a list of known ones: what a hook writes comes back with it.
        files = tuple(
            (p.name, p.read_bytes())
            for p in sorted(run_dir.iterdir())
            if p.is_file() and p.name not in _LOCAL_ONLY
        )
        result = dataclasses.replace(result, files=files)
        shutil.rmtree(run_dir, ignore_errors=True)
    else:
        write_atomic(run_dir / "result.json", orjson.dumps(result))
    return result


HOLD = "hold"
"""A local worker's file the coordinator creates while a restarted target is down."""
HOLD_ACK = "hold-ack"
"""The file a local worker keeps while it holds: its confirmation to the coordinator."""
_LOCAL_ONLY = frozenset({"progress.json", "live.json", READY, GO, HOLD, HOLD_ACK})
"""A worker's files that only a parent on its machine reads while it runs."""


def local_hold_line(run_dir: Path) -> HoldChannel:
    """The hold through files in a local worker's folder."""
    from loadtest.features.faults.load import HoldChannel

    ack = run_dir / HOLD_ACK

    def confirm(held: bool) -> None:
        if held:
            ack.touch()
        else:
            ack.unlink(missing_ok=True)

    return HoldChannel((run_dir / HOLD).exists, confirm)


async def _build_runner(cfg: RunConfig, job: WorkerJob, hold_line: HoldChannel) -> Runner:
    """The runner of one worker: its prompts, or its share of a workload (a trace split
    by line), with the hooks every process of a run attaches."""
    from loadtest.app.process.assembly import edge_hooks, load_hooks
    from loadtest.datasets import build_pool
    from loadtest.engine.runner import Runner
    from loadtest.features.workload import is_workload, workload_for

    spec = AGENT.get(cfg.scenario)
    if spec is not None:
        from loadtest.features.agent.driver import AgentDriver
        from loadtest.features.agent.taskspec import build_tasks

        tasks = build_tasks(TASKS.of(cfg.scenario), cfg.scenario.seed)
        agent = AgentDriver(spec, tasks, cfg.scenario.seed)
        hooks = [
            *edge_hooks(cfg, {"tasks": tasks.size}),
            *load_hooks(cfg.scenario, job.index, job.workers, hold_line),
            agent,
        ]
        return Runner(cfg, None, hooks=hooks, unit=agent)
    if not is_workload(cfg.scenario):
        pool, counts = build_pool(cfg.scenario)
        hooks = [
            *edge_hooks(cfg, counts),
            *load_hooks(cfg.scenario, job.index, job.workers, hold_line),
        ]
        return Runner(cfg, pool, hooks=hooks)
    share = (job.index, job.workers, job.run_seed)
    wl = await asyncio.to_thread(
        workload_for, cfg.scenario, cfg.endpoint, cfg.model, cfg.api_key, share
    )
    assert wl is not None
    # A trace's lines are split by the workload, each keeping its recorded time: the
    # worker sends every one of its own (the split planned a share of the scenario's
    # own arrivals, before the trace replaced them).
    trace = wl.scenario.load.mode == "trace"
    own = (0, 1) if trace else cfg.arrival_share
    cfg = dataclasses.replace(cfg, scenario=wl.scenario, arrival_share=own)
    hooks = [
        *edge_hooks(cfg, dict(wl.counts)),
        *load_hooks(cfg.scenario, job.index, job.workers, hold_line),
        *wl.hooks,
    ]
    return Runner(cfg, wl.pool, hooks=hooks, unit=wl.unit)


async def _poll_stop(runner: Runner, stop_count: Callable[[], int]) -> None:
    seen = 0
    while True:
        await asyncio.sleep(0.5)
        pressed = await asyncio.to_thread(stop_count)
        while seen < pressed:
            seen += 1
            runner.on_stop_signal()


async def _progress(
    runner: Runner,
    run_dir: Path,
    live: bool,
    publish: Callable[[bytes], None] | None = None,
) -> None:
    """Once a second: counters for progress lines; with ``live``, the metrics too.

    ``live``: the parent shows a dashboard of all workers, or feeds live outputs
    (``app.process.live``), from each worker's encoded histograms (``live.json``), merged as at
    the end of the run; ``publish`` also hands it on (a Ray task, to the control actor).
    """
    while True:
        await asyncio.sleep(1.0)
        m = runner.metrics
        state = {
            "sent": m.sent,
            "ok": m.outcomes["ok"],
            "failed": m.outcomes["failed"],
            "in_flight": runner.in_flight,
            "rate": m.rate_history[-1] if m.rate_history else 0.0,
            "tok_rate": m.token_rate_history[-1] if m.token_rate_history else 0.0,
        }
        write_atomic(run_dir / "progress.json", orjson.dumps(state))
        if live:
            from loadtest.app.process.live import live_snapshot

            data = orjson.dumps(await live_snapshot(runner))
            write_atomic(run_dir / "live.json", data)
            if publish is not None:  # a Ray task: its folder is not the parent's
                publish(data)
