"""The hooks every process that sends load attaches: one assembly for 1..N workers.

A one-process run is the coordinator and its only worker at once: it attaches the rig
(``rig_hooks``) beside what every worker attaches (``edge_hooks`` and ``load_hooks``).
A run with workers attaches the edge and load hooks in each worker and runs the rig once
in the parent (``coordinator.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadtest.config.feature_specs import FAULTS
from loadtest.engine.blocks import block_hooks
from loadtest.engine.gc_policy import QuietGc
from loadtest.features.faults.load import FaultLoad, HoldChannel, HoldFlag, acts_in_load
from loadtest.report.hlog import HlogHook
from loadtest.report.run_start import RunStartHook

if TYPE_CHECKING:
    from loadtest.app.deployment import Deployment
    from loadtest.config.scenario import Scenario
    from loadtest.engine.hooks import RunHook
    from loadtest.engine.runner import RunConfig

__all__ = ["edge_hooks", "load_hooks", "rig_hooks"]


def edge_hooks(cfg: RunConfig, prompts: dict[str, int]) -> list[RunHook]:
    """What every process of a run attaches: the start record (what a summary rebuilt
    after a kill needs), the interval log, the GC policy, and the hook of each summary
    block that feeds itself (a plugin's: ``engine.blocks``)."""
    return [RunStartHook(cfg, prompts), HlogHook(), QuietGc(), *block_hooks(cfg.scenario)]


def load_hooks(
    scenario: Scenario, worker: int, workers: int, hold_line: HoldChannel | None = None
) -> list[RunHook]:
    """The fault plan's part inside worker ``worker`` of ``workers`` (none without one);
    the worker's scenario carries its own seed; ``hold_line``: the coordinator's flag that
    a restarted target is down, and this worker's confirmation that it holds."""
    plan = FAULTS.of(scenario)
    if not acts_in_load(plan):
        return []
    hold = HoldFlag(hold_line) if hold_line is not None else None
    return [FaultLoad(plan, scenario.seed, worker=worker, workers=workers, hold=hold)]


def rig_hooks(dep: Deployment) -> list[RunHook]:
    """The fault plan in one process: the rig (beside the load) and its part in the load,
    which holds the load while a restarted target is down."""
    return [dep.rig, dep.rig.load_hook()]
