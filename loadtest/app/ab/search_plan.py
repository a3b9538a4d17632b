"""``ab --search``'s plan (pure): which load next, and where each category stops paying.

A category *pays* at a load when its step calls the candidate faster there (the
decision's own verdict, ``report.decision``); it stops paying at a load judged ``no
difference`` or ``slower``. Speculation pays at light load and stops as batches grow,
so each category's boundary is searched as ``sweep --search`` searches the SLOs'
(``search_plan``): probe upward geometrically from LO while some category still pays at
the top, then bisect the widest open bracket at its geometric mean, until every
category's bracket is one step wide (whole numbers) or within the tolerance, or the
steps run out. A category that cannot be told where the plan needs it (too few values,
a step whose comparison cannot stand) ends there, saying so.

**Error control.** The plan reads earlier steps before it chooses the next, so the
search's tests are not a family fixed in advance, as a grid's are. Its alpha is spent
evenly over its step budget, ``ALPHA / max_steps`` a step, with Holm inside a step over
its categories' deciding metrics: by the union bound the chance that any step of a
search on identical sides calls any category faster or slower, and so calls a
crossover, is at most ``ALPHA``, however the steps were chosen, because each step is
judged on its own new runs only. Steps never run spend nothing, so a search that ends
early is conservative.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from loadtest.app.capacity.search_plan import Bracket, Decision, Point, SearchSpec, between, bracket
from loadtest.measure.stats import ALPHA, MIN_EFFECT
from loadtest.model.decision import (
    AbSearch,
    CellVerdict,
    SearchCrossover,
    SearchProbe,
)
from loadtest.model.decision import Decision as DecisionJson
from loadtest.model.search import Outcome
from loadtest.report.decision import Step, decide

__all__ = [
    "CategoryState",
    "Probe",
    "alpha_per_step",
    "category_state",
    "next_ab_load",
    "search_decision",
    "search_loop",
]

NOT_PAYING: frozenset[CellVerdict] = frozenset({"no difference", "slower"})


@dataclass(frozen=True, slots=True)
class Probe:
    """One step as the plan reads it: its load and each category's verdict there."""

    load: float
    verdicts: dict[str, CellVerdict]


@dataclass(frozen=True, slots=True)
class CategoryState:
    """Where one category's search stands: probing up, bisecting, or done (and why)."""

    category: str
    bracket: Bracket
    state: Literal["probe", "bisect", "done"]
    why: str


def alpha_per_step(spec: SearchSpec) -> float:
    """Each step's share of the search's alpha (``spec.budget`` is its most steps)."""
    return ALPHA / spec.budget


def _points(probes: Sequence[Probe], category: str) -> list[Point]:
    points = []
    for p in probes:
        verdict = p.verdicts.get(category)
        if verdict is not None:
            outcome: Outcome = (
                "pass"
                if verdict == "faster"
                else "fail"
                if verdict in NOT_PAYING
                else "cannot tell"
            )
            points.append(Point(p.load, outcome, why=verdict))
    return points


def category_state(spec: SearchSpec, probes: Sequence[Probe], category: str) -> CategoryState:
    """One category's bracket over the steps so far and what it still needs."""
    points = _points(probes, category)
    unclear = sorted(p.load for p in points if p.outcome == "cannot tell")
    b = bracket(points)
    kind = spec.kind

    def done(why: str) -> CategoryState:
        return CategoryState(category, b, "done", why)

    if b.passes is None and b.fails is None:
        if all(p.why == "not exercised" for p in points):
            return done("not exercised: no step measured it on both sides")
        at = f" at {kind} {unclear[0]:g}" if unclear else ""
        return done(f"cannot tell{at}")
    if b.fails is None:
        assert b.passes is not None
        if b.passes >= spec.hi:
            return done(f"pays across the range, up to {kind} {spec.hi:g}")
        above = [x for x in unclear if x > b.passes]
        if above:
            return done(f"pays up to {kind} {b.passes:g}; cannot tell at {above[0]:g}")
        return CategoryState(category, b, "probe", f"faster at {kind} {b.passes:g}")
    if b.passes is None:
        return done(f"does not pay at {kind} {b.fails:g}, the lowest load it was judged at")
    if b.closed(spec):
        return done(f"pays up to {kind} {b.passes:g}; stops paying from {b.fails:g}")
    mid = between(spec, b.passes, b.fails)
    if any(p.load == mid for p in probes):
        return done(
            f"cannot tell between {kind} {b.passes:g} (faster) and {b.fails:g} (not): "
            f"{mid:g} was run and could not tell"
        )
    return CategoryState(category, b, "bisect", f"faster at {b.passes:g}, not from {b.fails:g}")


def _categories(probes: Sequence[Probe]) -> list[str]:
    return sorted({c for p in probes for c in p.verdicts})


def next_ab_load(spec: SearchSpec, probes: Sequence[Probe]) -> Decision:
    """The plan's next load after ``probes`` (None: the search is over), and why."""
    if not probes:
        return Decision(spec.lo, "start at the range's bottom")
    states = [category_state(spec, probes, c) for c in _categories(probes)]
    if len(probes) >= spec.budget:
        return Decision(None, f"the budget of {spec.budget} steps is spent")
    probing = [s.category for s in states if s.state == "probe"]
    top = max(p.load for p in probes)
    if probing:
        nxt = min(spec.hi, top * 2)
        return Decision(nxt, f"probing up: {', '.join(probing)} still faster at {top:g}")
    open_ = [s for s in states if s.state == "bisect"]
    if open_:
        widest = max(open_, key=lambda s: (s.bracket.fails or 0) / (s.bracket.passes or 1))
        b = widest.bracket
        assert b.passes is not None
        assert b.fails is not None
        return Decision(
            between(spec, b.passes, b.fails), f"bisecting {widest.category}: {widest.why}"
        )
    return Decision(None, "every category's answer is found")


def _crossover(spec: SearchSpec, s: CategoryState, stop: str) -> SearchCrossover:
    b = s.bracket
    text = s.why
    if s.state != "done":  # the budget ran out first
        text = (
            f"cannot tell between {spec.kind} {b.passes:g} (faster) and {b.fails:g} (not): {stop}"
            if b.passes is not None and b.fails is not None
            else f"pays up to {spec.kind} {b.passes:g}, the highest load tried: {stop}"
        )
    elif b.passes is not None and b.fails is not None and b.closed(spec):
        agree = (b.low, b.high) == (b.passes, b.fails)
        lo = "-" if b.low is None else f"{b.low:g}"
        hi = "-" if b.high is None else f"{b.high:g}"
        text += (
            " (every step agrees)"
            if agree
            else f" (steps disagree: the boundary is in [{lo}, {hi}])"
        )
    closed = b.passes is not None and b.fails is not None and b.closed(spec)
    return {
        "category": s.category,
        "pays_to": b.passes,
        "stops_from": b.fails,
        "closed": closed,
        "text": text,
    }


def search_decision(
    spec: SearchSpec,
    ran: Sequence[tuple[Step, str]],
    *,
    repeat: int,
    min_effect: float = MIN_EFFECT,
    interrupted: bool = False,
    stop: str = "searching",
    resamples: int | None = None,
) -> tuple[DecisionJson, list[Probe]]:
    """The decision over the steps run so far (each with the plan's reason), each step
    judged at its share of alpha; and the probes the plan reads back from it."""
    level = alpha_per_step(spec)
    ordered = sorted(ran, key=lambda r: r[0].load)
    steps = [step for step, _ in ordered]
    d = decide(
        spec.kind,
        steps,
        repeat=repeat,
        min_effect=min_effect,
        interrupted=interrupted,
        alphas=[level] * len(steps),
        resamples=resamples,
    )
    verdicts: dict[float, dict[str, CellVerdict]] = {s.load: {} for s in steps}
    for row in d["rows"]:
        for call in row["steps"]:
            verdicts[call["load"]][row["category"]] = call["verdict"]
    probes = [Probe(step.load, verdicts[step.load]) for step, _ in ran]
    states = [category_state(spec, probes, c) for c in _categories(probes)]
    spending = (
        f"alpha {ALPHA:g} spent evenly over the search's {spec.budget} steps at most "
        f"({level:.4g} a step; the union bound holds however the plan chose them, each "
        "step being judged on its own new runs), Holm within a step over each category's "
        "deciding metrics and the whole mix's goodput"
    )
    d["family"] = spending
    d["search"] = AbSearch(
        kind=spec.kind,
        lo=spec.lo,
        hi=spec.hi,
        tolerance=spec.tolerance,
        max_steps=spec.budget,
        alpha_per_step=level,
        spending=spending,
        probes=[SearchProbe(load=step.load, plan=why, alpha=level) for step, why in ran],
        crossovers=[_crossover(spec, s, stop) for s in states],
        stopped_because=stop,
    )
    return d, probes


StepAt = Callable[[float, int], tuple[Step | None, bool]]
"""Run the ab step at a load (its index in run order): the step (None when stopped
before both sides had a run) and whether Ctrl-C stopped it."""


def search_loop(
    spec: SearchSpec,
    step_at: StepAt,
    *,
    repeat: int,
    min_effect: float = MIN_EFFECT,
    say: Callable[[str], None] = print,
    written: Callable[[DecisionJson], None] = lambda _: None,
    resamples: int | None = None,
) -> tuple[DecisionJson, bool]:
    """Run the plan to its end: (the decision with its ``search``, stopped by Ctrl-C).
    ``written`` gets the decision after every step, for ``decision.json``."""
    ran: list[tuple[Step, str]] = []
    probes: list[Probe] = []
    stopped = False
    while True:
        plan = next_ab_load(spec, probes)
        if plan.load is None:
            stop = plan.why
            break
        say(f"step {len(ran) + 1}: {spec.kind} {plan.load:g} ({plan.why})")
        step, stopped = step_at(plan.load, len(ran))
        if step is not None:
            ran.append((step, plan.why))
        if stopped or step is None:
            stop = "stopped by Ctrl-C" if stopped else "a step ended before both sides ran"
            break
        d, probes = search_decision(
            spec, ran, repeat=repeat, min_effect=min_effect, resamples=resamples
        )
        written(d)
    d, _ = search_decision(
        spec,
        ran,
        repeat=repeat,
        min_effect=min_effect,
        interrupted=stopped,
        stop=stop,
        resamples=resamples,
    )
    written(d)
    return d, stopped
