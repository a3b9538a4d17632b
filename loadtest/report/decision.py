"""The speculation decision across load: per category and step, judged over the sweep.

Every step of ``ab --sweep`` is an ``ab`` (both sides interleaved and repeated), with
its own ``comparison.json``. The decision asks one narrower question of all of them at
once: per prompt category, is the candidate faster on the metric that decides for that
category, at each load? The metric follows the category:

- **tool calls** (a category where at least half of the baseline's completed requests
  made a valid tool call, agent sessions' included): the median time to a valid tool
  call;
- **reasoning** (a category where at least half of the baseline's completed requests
  reasoned before answering, and no tool calls decide it): the median time to the
  first answer token, then the answer's own median duration: the two parts a user
  waits through, so the verdict lines show both;
- **text** (code, multilingual, any other): median end-to-end time, then median TPOT;
- **whole mix**: goodput per second under the scenario's per-request SLOs, from each
  run's own value (``summary.json``): goodput is a rate of a whole run, not a value per
  request, so its test is Welch's t-test on the runs' values (two or more a side;
  with one, it cannot tell) and its interval Welch's.

**The family**: every test of every step x category x deciding metric (goodput
included) is adjusted together with Holm-Bonferroni, so the chance of calling any cell
of an unchanged deployment faster or slower is at most ``ALPHA`` over the whole sweep,
not per step. Steps whose comparison cannot stand (nothing measured, unlike sides) test
nothing and so are not in the family. The bootstrap gets enough resamples that its
smallest p-value, adjusted over the family, still falls below ``ALPHA``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from loadtest.measure.stats import (
    ALPHA,
    MIN_EFFECT,
    holm,
    practical_effect,
)
from loadtest.model.decision import (
    Decision,
    DecisionCell,
    DecisionRow,
    DecisionStep,
    StepCall,
)
from loadtest.report import draft_choice
from loadtest.report.crossover import Point, bracket
from loadtest.report.decision_cells import (
    RunSamples,
    Test,
    goodput_test,
    joint,
    judged,
    latency_test,
)

__all__ = [
    "GOODPUT",
    "METRIC_LABELS",
    "MIX",
    "RunSamples",
    "Step",
    "decide",
    "resamples_for",
]

GOODPUT = "goodput_per_s"
MIX = "whole mix"
"""The row of goodput: it is a figure of the whole run, not of one category."""
TOOL_METRICS = ("tool_call_ms",)
TEXT_METRICS = ("e2e_ms", "tpot_ms")
REASONING_METRICS = ("ttfa_ms", "answer_ms")
METRIC_LABELS = {
    "tool_call_ms": "tool call",
    "e2e_ms": "e2e",
    "tpot_ms": "TPOT",
    "ttfa_ms": "TTFA",
    "answer_ms": "answer",
    GOODPUT: "good/s",
}
TOOL_SHARE = 0.5
"""A category is decided on time to a valid tool call when at least this share of the
baseline's completed requests in it made one."""


@dataclass(frozen=True, slots=True)
class Step:
    """One load step: the runs of both sides and whether its comparison stands."""

    load: float
    baseline: Sequence[RunSamples]
    candidate: Sequence[RunSamples]
    folder: str = ""
    blocked: str | None = None
    draft: Mapping[int, Sequence[RunSamples]] = field(default_factory=dict)
    """With ``--draft-max``: the candidate's runs per draft length (``candidate`` unused)."""


def resamples_for(family: int, floor: int = 2000, alpha: float = ALPHA) -> int:
    """Bootstrap resamples such that the smallest p-value (2 / (R + 1)), adjusted over a
    family of ``family`` tests, is at most half of ``alpha``."""
    return max(floor, math.ceil(4 * family / alpha))


def _rule(steps: Sequence[Step], category: str) -> tuple[str, tuple[str, ...]]:
    calls = ok = reasoned = 0
    for s in steps:
        for r in s.baseline:
            values = r.by_category.get(category, {})
            ok += r.ok.get(category, 0)
            calls += values.get("tool_call_ms", np.empty(0)).size
            reasoned += values.get("ttfa_ms", np.empty(0)).size  # requests that reasoned
    if ok and calls >= TOOL_SHARE * ok:
        return "tool calls", TOOL_METRICS
    if ok and reasoned >= TOOL_SHARE * ok:
        return "reasoning", REASONING_METRICS
    return "text", TEXT_METRICS


def _quoted(call: StepCall) -> DecisionCell:
    return next((c for c in call["cells"] if c["verdict"] == call["verdict"]), call["cells"][0])


def _arms(step: Step) -> list[tuple[int | None, Sequence[RunSamples]]]:
    """The candidates of a step: the one candidate, or one per draft length."""
    if step.draft:
        return [(k, step.draft[k]) for k in sorted(step.draft)]
    return [(None, step.candidate)]


def decide(
    kind: str,
    steps: Sequence[Step],
    *,
    repeat: int,
    min_effect: float = MIN_EFFECT,
    interrupted: bool = False,
    resamples: int | None = None,
    draft_setting: str = "draft length",
    alphas: Sequence[float] | None = None,
) -> Decision:
    """The decision over ``steps`` (in load order): rows, cells, brackets (pure).

    With draft lengths (``Step.draft``), every K is a candidate judged against the
    baseline, one row per category per K, and the pair tests that pick the best K
    (``draft_choice``) join the same Holm family.

    ``alphas`` (one per step, ``ab --search``): each step is its own Holm family at its
    own level, the levels summing to at most ``ALPHA`` over the search (alpha spending),
    instead of one family over the whole sweep at ``ALPHA``. No draft lengths then."""
    if alphas is not None and (len(alphas) != len(steps) or any(s.draft for s in steps)):
        raise ValueError("alphas: one level per step, and no draft lengths")
    arms = sorted({k for s in steps for k, _ in _arms(s)}, key=lambda k: -1 if k is None else k)
    categories = sorted(
        {
            c
            for s in steps
            for _, runs in _arms(s)
            for r in (*s.baseline, *runs)
            for c in r.by_category
        }
    )
    rules = {c: _rule(steps, c) for c in categories}
    rows: list[tuple[int | None, str, str, tuple[str, ...]]] = []
    for k in arms:
        rows += [(k, c, *rules[c]) for c in categories]
        rows.append((k, MIX, "whole mix", (GOODPUT,)))
    live = [s for s in steps if s.blocked is None]
    drafts = [k for k in arms if k is not None]
    pairs_planned = len(categories) * max(len(drafts) - 1, 0) * len(live)
    per_step = sum(len(m) for *_, m in rows)
    family = per_step * len(live) + pairs_planned
    if alphas is None:
        r = resamples or resamples_for(family)
    else:
        r = resamples or resamples_for(per_step, alpha=min(alphas, default=ALPHA))
    tests: dict[tuple[int, int, str], Test] = {}
    for i, s in enumerate(steps):
        by_arm = dict(_arms(s))
        for j, (k, cat, _, metrics) in enumerate(rows):
            runs = by_arm.get(k, ())
            effect = practical_effect(len(s.baseline), max(len(runs), 1), min_effect)
            for m in metrics:
                if s.blocked is not None:
                    why = s.blocked
                    tests[i, j, m] = Test(
                        None, None, None, None, None, None, effect, "cannot tell", why
                    )
                elif m == GOODPUT:
                    tests[i, j, m] = goodput_test(s.baseline, runs, effect)
                else:
                    tests[i, j, m] = latency_test(s.baseline, runs, cat, m, effect, r)
    deciding = {c: rules[c][1][0] for c in categories}
    pairs = draft_choice.pair_tests(
        [(s.load, s.blocked, s.draft) for s in steps], deciding, min_effect, r
    )
    flat: dict[tuple[object, ...], Test] = {key: t for key, t in tests.items()}
    flat.update({("pair", *key): t for key, t in pairs.items()})
    keys = [key for key, t in flat.items() if t.p_value is not None]
    families = (
        [keys] if alphas is None else [[k for k in keys if k[0] == i] for i in range(len(steps))]
    )
    adjusted: dict[tuple[object, ...], float] = {}
    for family_keys in families:
        p_values = holm([flat[key].p_value or 0.0 for key in family_keys])
        adjusted.update(zip(family_keys, p_values, strict=True))
    levels = [ALPHA] * len(steps) if alphas is None else list(alphas)
    out_rows: list[DecisionRow] = []
    for j, (k, cat, rule, metrics) in enumerate(rows):
        calls: list[StepCall] = []
        for i, s in enumerate(steps):
            cells = []
            for m in metrics:
                cell = judged(tests[i, j, m], adjusted.get((i, j, m)), levels[i])
                cell["metric"] = m
                cells.append(cell)
            calls.append({"load": s.load, "verdict": joint(cells), "cells": cells})
        points = []
        for call in calls:
            q = _quoted(call)
            label = METRIC_LABELS[q["metric"]]
            points.append(
                Point(
                    call["load"],
                    call["verdict"],
                    q["effect"],
                    q["effect_low"],
                    q["effect_high"],
                    label,
                    q["metric"] != GOODPUT,
                )
            )
        row: DecisionRow = {
            "category": cat,
            "deciding": list(metrics),
            "rule": rule,
            "steps": calls,
            "bracket": bracket(points),
        }
        if k is not None:
            row["draft_max"] = k
        out_rows.append(row)
    step_json: list[DecisionStep] = [
        {"load": s.load, "folder": s.folder, "blocked": s.blocked} for s in steps
    ]
    lone = any(min(len(s.baseline), *(len(x) for _, x in _arms(s))) < 2 for s in steps)
    against = f" x {len(drafts)} draft lengths, and each K against the fastest K" if drafts else ""
    decision: Decision = {
        "kind": kind,
        "loads": [s.load for s in steps],
        "repeat": repeat,
        "alpha": ALPHA,
        "min_effect": practical_effect(1 if lone else 2, 2, min_effect),
        "min_effect_asked": min_effect,
        "family": (
            "Holm-Bonferroni over every tested cell of the sweep: each step x each "
            "category's deciding metrics (time to a valid tool call; TTFA and answer; e2e "
            "and TPOT) x the "
            f"whole mix's goodput{against}; {len(keys)} tests of {family} planned"
        ),
        "family_size": len(keys),
        "resamples": r,
        "steps": step_json,
        "rows": out_rows,
        "interrupted": interrupted,
    }
    if drafts:
        held = {key: adjusted.get(("pair", *key)) for key in pairs}
        picks = draft_choice.picks(pairs, held, [s.load for s in steps], drafts, deciding)
        decision["draft"] = {"setting": draft_setting, "values": drafts, "picks": picks}
    return decision
