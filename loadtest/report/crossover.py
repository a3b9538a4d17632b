"""The crossover of a category as a bracket: where a candidate stops paying. Pure.

A sweep judges a category at a few loads; between two steps nothing was measured, so
the honest answer is a bracket, not a point: "faster up to 4 (e2e -31% [-35, -27]),
slower from 8". A step that could not be called is said as such ("cannot tell between
4 and 8"), never read as "no difference". A point estimate of the crossover is given
only where two neighbouring steps were both called and the effect changes sign between
them, interpolated linearly in load.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from loadtest.model.decision import Bracket, CellVerdict

__all__ = ["Point", "bracket", "effect_text"]

CALLED: frozenset[CellVerdict] = frozenset({"faster", "slower", "no difference"})


@dataclass(frozen=True, slots=True)
class Point:
    """A category at one load: its verdict and the effect the bracket quotes."""

    load: float
    verdict: CellVerdict
    effect: float | None = None
    """(B - A) / A of the quoted metric; None when nothing was measured."""
    low: float | None = None
    high: float | None = None
    label: str = ""
    """The quoted metric as said (``e2e``)."""
    lower_is_better: bool = True
    """False for a rate (goodput): its effect grows as the candidate gets better."""

    @property
    def cost(self) -> float | None:
        """The effect signed so that below zero is better for the candidate."""
        if self.effect is None:
            return None
        return self.effect if self.lower_is_better else -self.effect


def effect_text(effect: float | None, low: float | None, high: float | None, label: str) -> str:
    """``e2e -31% [-35, -27]`` (the interval's ends without their sign's ``+``)."""
    if effect is None:
        return f"{label} no data".strip()
    ci = "" if low is None or high is None else f" [{low:.0%}, {high:.0%}]".replace("%", "")
    return f"{label} {effect:+.0%}{ci}".strip()


def _said(verdict: CellVerdict) -> str:
    # "not exercised" joins "cannot tell": neither says anything about the candidate.
    return "cannot tell" if verdict not in CALLED else verdict


def _quoted(p: Point) -> str:
    if p.verdict in ("faster", "slower"):
        return f" ({effect_text(p.effect, p.low, p.high, p.label)})"
    return ""


def _runs(points: Sequence[Point]) -> list[list[Point]]:
    runs: list[list[Point]] = []
    for p in points:
        if runs and _said(runs[-1][0].verdict) == _said(p.verdict):
            runs[-1].append(p)
        else:
            runs.append([p])
    return runs


def _loads(run: Sequence[Point]) -> str:
    return ", ".join(f"{p.load:g}" for p in run)


def _words(runs: Sequence[Sequence[Point]]) -> str:
    parts: list[str] = []
    for i, run in enumerate(runs):
        said = _said(run[0].verdict)
        before = runs[i - 1][-1].load if i > 0 else None
        after = runs[i + 1][0].load if i + 1 < len(runs) else None
        if said == "cannot tell" and before is not None and after is not None:
            parts.append(f"cannot tell between {before:g} and {after:g}")
        elif i == 0:
            parts.append(f"{said} up to {run[-1].load:g}{_quoted(run[-1])}")
        elif i == len(runs) - 1:
            parts.append(f"{said} from {run[0].load:g}{_quoted(run[0])}")
        else:
            parts.append(f"{said} at {_loads(run)}")
    return ", ".join(parts)


def _crossing(points: Sequence[Point], low: float, high: float) -> float | None:
    """Where the effect goes from below zero to above it, between two called neighbours
    inside [low, high]."""
    for p, q in itertools.pairwise(points):
        if not (low <= p.load and q.load <= high):
            continue
        if p.verdict not in CALLED or q.verdict not in CALLED:
            continue
        a, b = p.cost, q.cost
        if a is None or b is None or not (a < 0 <= b):
            continue
        share = -a / (b - a)
        return round(p.load + share * (q.load - p.load), 3)
    return None


def bracket(points: Sequence[Point]) -> Bracket:
    """The bracket of one category over the sweep's steps (``points`` in load order)."""
    ordered = sorted(points, key=lambda p: p.load)
    unknown = [p.load for p in ordered if p.verdict not in CALLED]
    runs = _runs(ordered)
    shape = ", then ".join(_said(r[0].verdict) for r in runs)
    if not runs:
        text = "not exercised: no step"
    elif len(runs) == 1:
        text = f"{_said(runs[0][0].verdict)} across the range"
    else:
        text = _words(runs)
    faster_to = slower_from = None
    for p in ordered:
        if p.verdict == "slower":
            slower_from = p.load
            break
        if p.verdict == "faster":
            faster_to = p.load
    crossover = None
    if faster_to is not None and slower_from is not None:
        crossover = _crossing(ordered, faster_to, slower_from)
    return {
        "text": text,
        "shape": shape,
        "faster_to": faster_to,
        "slower_from": slower_from,
        "crossover": crossover,
        "cannot_tell": unknown,
    }
