"""What a run decides and checks before it starts anything; ``--check`` prints it.

``plan_run`` is the run's validation, and the only one: the scenario with the flags laid
over it, the API key and TLS, the split over workers (``--workers``, ``--ray``), what
the deployment can carry out, and the fault windows the run will not reach or measure.
``run_job`` starts from this plan and ``check_job`` prints it, after loading the prompts
as the run does before its load, so the two cannot drift apart: what ``--check`` passes
the run does not refuse, and both warn alike.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import ssl
import time
from dataclasses import dataclass
from pathlib import Path

from loadtest.app.deployment import check_deployment
from loadtest.app.options import Note, RunOptions, resolve_access, resolve_scenario, start_notes
from loadtest.app.process.inprocess import Prompts
from loadtest.app.scale.workers import WorkerPlan, split_load
from loadtest.config.feature_specs import AGENT, FAULTS, TASKS
from loadtest.config.scenario import Scenario
from loadtest.datasets import build_pool
from loadtest.errors import MissingExtraError, UsageError
from loadtest.features.agent.taskspec import build_tasks
from loadtest.features.faults.timeline import RunFrame, timeline_warnings
from loadtest.features.workload import is_workload, needs_tokenizer, prepare_workload

__all__ = ["RunPlan", "load_prompts", "plan_run", "prompt_counts", "run_frame"]


@dataclass(frozen=True, slots=True)
class RunPlan:
    """Everything decided before anything is started."""

    scenario: Scenario
    options: RunOptions
    """With the resolved API key in ``api_key``."""
    run_dir: Path
    tls: ssl.SSLContext | bool
    notes: tuple[Note, ...]
    """What to tell before the load: defaults taken, the key's source, and (``warn``)
    what weakens the run: no TLS check, fault windows it will skip or not measure."""
    splits: tuple[WorkerPlan, ...]
    """Each worker's share of the load; empty when the load runs in this process."""

    @property
    def sharded(self) -> bool:
        """True when the load runs in worker processes or Ray tasks."""
        return bool(self.splits)


def plan_run(options: RunOptions) -> RunPlan:
    """Every check a run makes before it starts a process or loads a data set.

    ``UsageError`` (or a ``ScenarioError``, ``MissingExtraError``) on what the run
    refuses, with the same message whether it comes from ``run`` or ``run --check``.
    """
    scenario = resolve_scenario(options)
    key, tls = resolve_access(scenario, options)
    splits: list[WorkerPlan] = []
    if options.workers > 1 or options.ray is not None:
        # Checked before the prompts load: a bad split should not wait for data sets.
        splits = split_load(scenario.load, options.workers, scenario.seed)
        if options.ray is not None and importlib.util.find_spec("ray") is None:
            raise MissingExtraError("--ray", "ray")
    warnings = [
        *check_deployment(scenario, options.endpoint),
        *timeline_warnings(FAULTS.of(scenario), run_frame(scenario)),
    ]
    return RunPlan(
        scenario=scenario,
        options=dataclasses.replace(options, api_key=key),
        run_dir=Path(options.run_dir or Path(options.out) / _run_id(scenario.name)),
        tls=tls,
        notes=(*start_notes(scenario, options, key), *(Note(w, warn=True) for w in warnings)),
        splits=tuple(splits),
    )


def run_frame(scenario: Scenario) -> RunFrame:
    """The run's warm-up and end, as its stop plan will set them (``engine.stop``)."""
    load = scenario.load
    if any(s.kind == "trace" for s in scenario.sources):
        # A trace sets its own length, read with the trace once the endpoint is up.
        return RunFrame(load.warmup_s, None, "with its trace")
    if load.duration_s is None:
        return RunFrame(load.warmup_s, None, f"after {load.requests} requests")
    return RunFrame(load.warmup_s, load.warmup_s + load.duration_s)


def _run_id(name: str) -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.localtime()) + f"-{name}"


def load_prompts(scenario: Scenario) -> Prompts:
    """The prompts of a scenario, or the tasks of an agent scenario, with counts.

    None for a workload (synthetic lengths, a trace, conversations): its prompts need
    the endpoint's tokenizer, so they are built once the endpoint is up.
    """
    t0 = time.perf_counter()
    if is_workload(scenario):
        return Prompts(None, {}, time.perf_counter() - t0)
    if AGENT.get(scenario) is None:
        pool, counts = build_pool(scenario)
        return Prompts(pool, counts, time.perf_counter() - t0)
    tasks = build_tasks(TASKS.of(scenario), scenario.seed)
    if not tasks.size:
        raise UsageError(f"{scenario.path}: the [[tasks]] sources hold no tasks")
    return Prompts(tasks, {"tasks": tasks.size}, time.perf_counter() - t0)


def prompt_counts(scenario: Scenario) -> dict[str, int] | None:
    """What a run loads before its load, loaded the same way: counts by source.

    A workload is built too where it needs no endpoint; None where its prompts are cut
    with the endpoint's own tokenizer, which only a run can reach.
    """
    if not is_workload(scenario):
        return load_prompts(scenario).counts
    if needs_tokenizer(scenario):
        return None
    # The model only goes into request bodies, which are not built here.
    workload = prepare_workload(scenario, scenario.model or "", None)
    return workload.counts if workload is not None else {}
