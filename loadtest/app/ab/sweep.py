"""``loadtest ab --sweep``: an ``ab`` at every load step, then one decision over them all.

Each step is a whole ``ab`` (``run_ab``: both sides interleaved A B B A ..., repeated,
compared, ``comparison.json``) into ``OUT/<time>-ab-sweep-<name>/step-NN-<load>/``;
the steps run in increasing load, so a candidate that stops paying is seen doing so.
From every step's runs the decision (``report.decision``) judges each category on the
metric that decides for it, with Holm's correction over the whole sweep, and writes
``decision.json`` beside the steps. ``--fail-on slower`` is judged on it here
(``gate``), so the exit code and the closing line read one result.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import orjson

from loadtest.app.ab.costs import memory_budget, side_memory
from loadtest.app.ab.runs import letter, run_ab_many
from loadtest.app.ab.side_types import SIDE_TYPES, draft_setting_of
from loadtest.app.ab.sides import RunFn, Side
from loadtest.app.options import RunOptions
from loadtest.config.dimensions import known_dimensions, parse_values
from loadtest.errors import UsageError
from loadtest.measure.stats import MIN_EFFECT
from loadtest.model.atomic import write_atomic
from loadtest.model.comparison import Comparison
from loadtest.model.decision import Decision, DecisionGate, SideAcceptance, SideMemory
from loadtest.report.acceptance_time import StepRecords, side_acceptance
from loadtest.report.compare import RunData, load_runs
from loadtest.report.compare_checks import CONFOUNDING
from loadtest.report.crossover import effect_text
from loadtest.report.decision import METRIC_LABELS, RunSamples, Step, decide

__all__ = [
    "AbSweepPlan",
    "StepRun",
    "gate",
    "parse_operating_point",
    "parse_sweep",
    "run_ab_sweep",
    "run_samples",
    "run_step",
    "step_label",
]


@dataclass(frozen=True, slots=True)
class AbSweepPlan:
    """The loads of a paired sweep: the values of one sweep dimension, in order."""

    kind: str
    steps: tuple[float, ...]


def parse_sweep(text: str) -> AbSweepPlan:
    """``concurrency=1,2,4,8``, ``rate=5,10,20`` or ``NAME=V,V,...`` of a registered sweep
    dimension (``config.dimensions``); ``UsageError`` naming ``--sweep``."""
    kind, eq, values = text.partition("=")
    kind = kind.strip()
    known = known_dimensions()
    if not eq or kind not in known:
        raise UsageError(
            f"--sweep {text!r}: expected concurrency=N,N,... or rate=R,R,... "
            f"(e.g. --sweep concurrency=1,2,4,8), or NAME=V,V,... of a sweep dimension "
            f"(known: {', '.join(known)})"
        )
    return AbSweepPlan(kind, parse_values(values, f"--sweep {text}", known[kind]))


def parse_operating_point(text: str, plan: AbSweepPlan) -> float:
    """``--operating-point concurrency=8``: one of the sweep's own loads."""
    kind, eq, value = text.partition("=")
    try:
        load = float(value)
    except ValueError:
        load = float("nan")
    if not eq or kind.strip() != plan.kind or load not in plan.steps:
        loads = ",".join(f"{s:g}" for s in plan.steps)
        raise UsageError(
            f"--operating-point {text!r}: expected {plan.kind}=LOAD, one of the sweep's "
            f"steps ({loads})"
        )
    return load


def step_label(kind: str, load: float) -> str:
    """How a step's runs are labelled on their lines: ``c=4``, ``r=10``."""
    return f"{kind[0]}={load:g}"


def run_samples(run: RunData) -> RunSamples:
    """What the decision reads from one run: per-category samples, goodput."""
    good = run.summary["slo"].get("goodput")
    return RunSamples(run.by_category, run.ok_by_category, good["per_s"] if good else None)


def _blocked(c: Comparison) -> str | None:
    why = [f["message"] for f in c["findings"] if f["blocking"] or f["kind"] in CONFOUNDING]
    return "; ".join(why) or None


def run_ab_sweep(
    base: RunOptions,
    sides: dict[str, Side],
    plan: AbSweepPlan,
    repeat: int,
    name: str,
    run: RunFn,
    *,
    min_effect: float = MIN_EFFECT,
    say: Callable[[str], None] = print,
    memory: tuple[str, float] | None = None,
) -> tuple[Decision, list[tuple[float, Comparison]], Path, bool]:
    """Every step's ``ab``, then the decision; returns (decision, comparisons, folder,
    stopped). A step stopped by Ctrl-C ends the sweep; what was done is still decided.
    ``memory``: ``--memory-budget`` as given and in MiB, judged on every side's runs."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime())
    folder = Path(base.out) / f"{stamp}-ab-sweep-{name}"
    steps: list[Step] = []
    compared: list[tuple[float, Comparison]] = []
    accepted: list[SideAcceptance] = []
    fitted: list[SideMemory] = []
    stopped = False
    for i, load in enumerate(plan.steps):
        say(f"step {i + 1}/{len(plan.steps)}: {plan.kind} {load:g}")
        done = run_step(
            base,
            sides,
            plan.kind,
            load,
            folder / f"step-{i:02d}-{load:g}",
            repeat,
            name,
            run,
            min_effect=min_effect,
            say=say,
            memory=memory,
        )
        stopped = done.stopped
        if done.step is None:
            break  # stopped before both sides had a run: nothing to decide at this load
        steps.append(done.step)
        compared += done.compared
        accepted += done.accepted
        fitted += done.fitted
        if stopped:
            break
    decision = decide(
        plan.kind,
        steps,
        repeat=repeat,
        min_effect=min_effect,
        interrupted=stopped,
        draft_setting=draft_setting(sides),
    )
    decision["acceptance"] = accepted
    if memory is not None:
        decision["memory"] = memory_budget(memory[0], memory[1], fitted)
    write_decision(folder, decision)
    return decision, compared, folder, stopped


@dataclass(frozen=True, slots=True)
class StepRun:
    """One load step's ab as the decision reads it, and what its runs measured."""

    step: Step | None
    """None: stopped before both sides had a run, nothing to decide at this load."""
    compared: list[tuple[float, Comparison]]
    accepted: list[SideAcceptance]
    fitted: list[SideMemory]
    stopped: bool


def run_step(
    base: RunOptions,
    sides: dict[str, Side],
    kind: str,
    load: float,
    step_folder: Path,
    repeat: int,
    name: str,
    run: RunFn,
    *,
    min_effect: float = MIN_EFFECT,
    say: Callable[[str], None] = print,
    memory: tuple[str, float] | None = None,
) -> StepRun:
    """A whole ``ab`` at one load into ``step_folder``, read back for the decision."""
    labels = (*base.live_labels, ("step", f"{load:g}"))
    options = dataclasses.replace(
        base,
        label=step_label(kind, load),
        live_labels=labels,
        steps=(*base.steps, (kind, load)),
    )
    done, _, stopped = run_ab_many(
        options, sides, repeat, name, run, min_effect=min_effect, say=say, folder=step_folder
    )
    judged = [(side, c) for side, c in done.items() if "metrics" in c]
    if not judged:
        return StepRun(None, [], [], [], stopped)
    compared: list[tuple[float, Comparison]] = []
    blocked: list[str] = []
    for side, c in judged:
        assert "metrics" in c  # a Comparison, not AbStopped
        compared.append((load, c))
        why = _blocked(c)
        if why:
            blocked.append(why if len(done) == 1 else f"{letter(side)}: {why}")
    loaded = {side: _side_runs(step_folder / side) for side in done}
    base_runs = _side_runs(step_folder / "baseline")
    fitted: list[SideMemory] = []
    for side, runs in (("baseline", base_runs), *loaded.items()):
        if memory is not None:
            deployed = [r.deployment for r in runs]
            fitted.append(side_memory(load, side, sides[side].given, deployed, memory[1]))
    candidates = {side: [run_samples(r) for r in runs] for side, runs in loaded.items()}
    accepted = [
        side_acceptance(
            load, sides[side].draft_max, [_steps(r) for r in runs], drafts=sides[side].drafts
        )
        for side, runs in loaded.items()
    ]
    draft = {sides[s].draft_max or 0: runs for s, runs in candidates.items()}
    step = Step(
        load,
        [run_samples(r) for r in base_runs],
        candidates.get("candidate", []),
        str(step_folder),
        "; ".join(blocked) or None,
        draft if "candidate" not in candidates else {},
    )
    return StepRun(step, compared, accepted, fitted, stopped)


def draft_setting(sides: dict[str, Side]) -> str:
    """What ``--draft-max`` varies on these sides, in words (``decision.json``)."""
    # The sides given a draft length (the candidates), not the baseline before them.
    kinds = [s.kind for s in sides.values() if s.draft_max is not None and s.kind is not None]
    if kinds:
        return draft_setting_of(SIDE_TYPES.load(kinds[0]))
    return "simulator spec_k (tokens the draft proposes per step)"


def _steps(run: RunData) -> tuple[str, StepRecords, list[float] | None]:
    server = run.summary.get("server")
    return str(run.path), run.steps, server.get("accepted_per_position") if server else None


def _side_runs(folder: Path) -> list[RunData]:
    return load_runs(folder) if folder.is_dir() else []


def write_decision(folder: Path, decision: Decision) -> None:
    """``decision.json`` in the sweep's folder, atomically."""
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "decision.json", orjson.dumps(decision, option=orjson.OPT_INDENT_2))


def gate(decision: Decision, fail_on: str, operating_point: float | None) -> DecisionGate:
    """``--fail-on slower``: each category found slower at a gated load, as a reason.

    With draft lengths a category fails at a load only where every K is slower there:
    the deployment can still be run at a K that pays."""
    reasons: list[str] = []
    found: dict[tuple[str, float], list[str]] = {}
    every: dict[tuple[str, float], int] = {}
    for row in decision["rows"] if fail_on == "slower" else []:
        for call in row["steps"]:
            if operating_point is not None and call["load"] != operating_point:
                continue
            key = (row["category"], call["load"])
            every[key] = every.get(key, 0) + 1
            if call["verdict"] != "slower":
                continue
            cell = next(c for c in call["cells"] if c["verdict"] == "slower")
            effect = effect_text(
                cell["effect"],
                cell["effect_low"],
                cell["effect_high"],
                METRIC_LABELS[cell["metric"]],
            )
            k = row.get("draft_max")
            found.setdefault(key, []).append(effect if k is None else f"K={k} {effect}")
    for (category, load), effects in found.items():
        if len(effects) == every[(category, load)]:
            reasons.append(f"{decision['kind']} {load:g}: {category} slower ({'; '.join(effects)})")
    return {
        "fail_on": fail_on,
        "operating_point": operating_point,
        "failed": bool(reasons),
        "reasons": reasons,
    }


def plan_lines(
    plan: AbSweepPlan,
    repeat: int,
    per_run_s: float | None,
    bound: str,
    sides: Sequence[str],
    *,
    swept: bool = True,
    starts: Sequence[str] = (),
) -> list[str]:
    """``--check``: steps x sides x repeats, and the time the runs alone will take.

    ``swept``: an ``ab --sweep`` (else one load, said as such); ``starts``: what each
    managed side pays at each run's start (``llama.cpp's cold start``), none for URLs."""
    runs = len(plan.steps) * len(sides) * repeat
    loads = ", ".join(f"{s:g}" for s in plan.steps)
    order = "A B B A" if len(sides) == 2 else "A B1 B2 .. B2 B1 A"
    steps = len(plan.steps)
    at = (
        f"ab sweep: {steps} {plan.kind} step{'s' * (steps > 1)} ({loads})"
        if swept
        else f"ab: {plan.kind} {loads}"
    )
    lines = [
        f"{at} x {len(sides)} sides x {repeat} repeat{'s' * (repeat > 1)} = {runs} runs, "
        f"interleaved {order}" + (" at each step" if swept else ""),
        f"  sides: baseline {sides[0]}, "
        + ("candidate " if len(sides) == 2 else "candidates ")
        + ", ".join(sides[1:]),
    ]
    plus = f", plus at each run's start {' and '.join(starts)}" if starts else ""
    if per_run_s is None:
        lines.append(f"  expected time: not known before a first run (each run is {bound}){plus}")
    else:
        total = runs * per_run_s
        lines.append(
            f"  expected time: {runs} runs x {per_run_s:g} s ({bound}) = {total / 60:.1f} min"
            + plus
        )
    return lines
