"""``ab --search``: the plan of ``ab.search_plan``, a whole ``ab`` a step.

Each step is an ``ab`` at the load the plan chose (``ab_sweep.run_step``: both sides
interleaved and repeated) into ``OUT/<time>-ab-search-<name>/step-NN-<load>/``, in the
order run. After every step ``decision.json`` is written again with every step judged
at its share of the search's alpha, and the ``search`` block (the plan's reasons, each
category's bracket), so a killed search keeps what it measured.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from loadtest.app.ab.search_plan import search_loop
from loadtest.app.ab.sides import RunFn, Side
from loadtest.app.ab.sweep import run_step, write_decision
from loadtest.app.capacity.search_plan import SearchSpec
from loadtest.app.options import RunOptions
from loadtest.measure.stats import MIN_EFFECT
from loadtest.model.comparison import Comparison
from loadtest.model.decision import Decision, SideAcceptance
from loadtest.report.decision import Step

__all__ = ["run_ab_search"]


def run_ab_search(
    base: RunOptions,
    sides: dict[str, Side],
    spec: SearchSpec,
    repeat: int,
    name: str,
    run: RunFn,
    *,
    min_effect: float = MIN_EFFECT,
    say: Callable[[str], None] = print,
) -> tuple[Decision, list[tuple[float, Comparison]], Path, bool]:
    """The search to its end; returns (decision, comparisons, folder, stopped)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime())
    folder = Path(base.out) / f"{stamp}-ab-search-{name}"
    compared: list[tuple[float, Comparison]] = []
    accepted: list[SideAcceptance] = []

    def step_at(load: float, index: int) -> tuple[Step | None, bool]:
        done = run_step(
            base,
            sides,
            spec.kind,
            load,
            folder / f"step-{index:02d}-{load:g}",
            repeat,
            name,
            run,
            min_effect=min_effect,
            say=say,
        )
        compared.extend(done.compared)
        accepted.extend(done.accepted)
        return done.step, done.stopped

    def written(decision: Decision) -> None:
        decision["acceptance"] = sorted(accepted, key=lambda a: a["load"])
        write_decision(folder, decision)

    decision, stopped = search_loop(
        spec, step_at, repeat=repeat, min_effect=min_effect, say=say, written=written
    )
    return decision, compared, folder, stopped
