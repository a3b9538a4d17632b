"""The capacity search's plan (pure): which load to run next, and what the runs so far say.

``sweep --search concurrency=LO..HI`` looks for the largest load that meets every SLO:

1. **Probe** upward geometrically from LO (LO, 2 LO, 4 LO, ... capped at HI) until a load
   fails; a range whose top meets the SLOs, or whose bottom fails, is an answer too.
2. **Bisect** between the highest load that passes and the lowest that fails, at their
   geometric mean (rounded for concurrency), until the bracket is one step wide (whole
   numbers) or within ``tolerance`` (``fail / pass - 1``).
3. **Confirm** the bracket's two edges with one more run each while the budget allows:
   repeats go where the answer is decided, not far from it. An edge that flips sends
   the bisection on with every run counted.

Every load's runs are read through a monotone fit (isotonic regression, decreasing in
load, weighted by runs): a load passes when its fitted pass share is over one half, so
one noisy run below the boundary cannot make the search climb a wall it already found.
Each SLO's margin (value over limit) is fitted the same way, increasing in load, and
where it crosses 1 estimates the boundary inside the bracket.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import isotonic_regression

from loadtest.errors import UsageError
from loadtest.model.search import MarginFit, Outcome

__all__ = [
    "Bracket",
    "Decision",
    "Point",
    "SearchSpec",
    "between",
    "bracket",
    "margin_fit",
    "next_load",
    "parse_search",
]


_BUILT_IN: Mapping[str, bool] = {"concurrency": True, "rate": False}
"""loadtest's own dimensions and whether their steps are whole numbers."""


@dataclass(frozen=True, slots=True)
class SearchSpec:
    """What to search: ``kind`` over [``lo``, ``hi``], to ``tolerance``, in ``budget`` runs."""

    kind: str
    """A sweep dimension: ``concurrency`` (whole numbers, closed loop), ``rate`` (open
    loop) or a plugin's (``config.dimensions``)."""
    lo: float
    hi: float
    tolerance: float = 0.10
    budget: int = 16
    whole_steps: bool | None = None
    """Whether a step is a whole number; None: as ``kind`` is ``concurrency``."""

    @property
    def whole(self) -> bool:
        return self.kind == "concurrency" if self.whole_steps is None else self.whole_steps


@dataclass(frozen=True, slots=True)
class Point:
    """One run of the search: its load, whether it met the SLOs, each SLO's margin."""

    load: float
    outcome: Outcome
    margins: tuple[tuple[str, float], ...] = ()
    """(SLO, its value over its limit) of the checks that had a value: > 1 missed."""
    why: str = ""
    """For ``cannot tell``: why (too few requests); for a saturated fail: the evidence."""


@dataclass(frozen=True, slots=True)
class Bracket:
    """What the runs so far say: the highest load that passes and the lowest that fails
    (by the monotone fit), and where every run agrees: all passed up to ``low``, all
    failed from ``high``. The boundary lies in [``low``, ``high``]; it is the bracket
    itself when no run disagrees with the fit."""

    passes: float | None
    fails: float | None
    low: float | None = None
    high: float | None = None

    def closed(self, spec: SearchSpec) -> bool:
        """One step wide (whole numbers) or within the tolerance."""
        if self.passes is None or self.fails is None:
            return False
        if spec.whole:
            return self.fails - self.passes <= 1
        return self.fails / self.passes - 1 <= spec.tolerance


@dataclass(frozen=True, slots=True)
class Decision:
    """The next load to run (None: the search is over) and why."""

    load: float | None
    why: str


def parse_search(text: str, known: Mapping[str, bool] = _BUILT_IN) -> tuple[str, float, float]:
    """``concurrency=1..256``, ``rate=0.5..40`` or ``NAME=LO..HI`` of a dimension in
    ``known`` (name: whether its steps are whole numbers) into (kind, lo, hi)."""
    kind, sep, span = text.partition("=")
    lo_text, dots, hi_text = span.partition("..")
    if kind not in known or not sep or not dots:
        others = sorted(set(known) - set(_BUILT_IN))
        also = f" (or NAME=LO..HI of a sweep dimension: {', '.join(others)})" if others else ""
        raise UsageError(f"--search {text}: give concurrency=LO..HI or rate=LO..HI{also}")
    try:
        lo, hi = float(lo_text), float(hi_text)
    except ValueError:
        raise UsageError(f"--search {text}: LO and HI must be numbers") from None
    if not (0 < lo < hi) or not math.isfinite(hi):
        raise UsageError(f"--search {text}: need 0 < LO < HI")
    if known[kind] and (lo != int(lo) or hi != int(hi)):
        raise UsageError(f"--search {text}: a {kind} is a whole number")
    return kind, lo, hi


def _by_load(points: Sequence[Point]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The loads tested (increasing), their runs, and the share of runs that passed."""
    judged = [p for p in points if p.outcome != "cannot tell"]
    loads = np.array(sorted({p.load for p in judged}), dtype=float)
    runs = np.array([sum(p.load == x for p in judged) for x in loads], dtype=float)
    passed = np.array(
        [sum(p.load == x and p.outcome == "pass" for p in judged) for x in loads], dtype=float
    )
    return loads, runs, passed / np.maximum(runs, 1)


def bracket(points: Sequence[Point]) -> Bracket:
    """The bracket by the monotone fit of every run (see the module docstring)."""
    loads, runs, share = _by_load(points)
    if not len(loads):
        return Bracket(None, None)
    fitted = isotonic_regression(share, weights=runs, increasing=False).x
    passing = loads[fitted > 0.5]
    failing = loads[fitted <= 0.5]
    passes = float(passing.max()) if len(passing) else None
    above = failing[failing > passes] if passes is not None else failing
    fails = float(above.min()) if len(above) else None
    clean_up = np.cumprod(share == 1.0).astype(bool)  # every run passed, from the bottom
    clean_down = np.cumprod((share == 0.0)[::-1]).astype(bool)[::-1]  # failed, to the top
    low = float(loads[clean_up].max()) if clean_up.any() else None
    high = float(loads[clean_down].min()) if clean_down.any() else None
    return Bracket(passes, fails, low, high)


def margin_fit(points: Sequence[Point]) -> list[MarginFit]:
    """Per SLO: each load's fitted margin (value over limit, increasing in load) and
    where the fit crosses 1 (linear between the two loads around it), if it does."""
    names = sorted({name for p in points for name, _ in p.margins})
    fits: list[MarginFit] = []
    for name in names:
        rows = [(p.load, m) for p in points for n, m in p.margins if n == name]
        loads = np.array(sorted({x for x, _ in rows}), dtype=float)
        mean = np.array([np.mean([m for x, m in rows if x == load]) for load in loads])
        weight = np.array([sum(x == load for x, _ in rows) for load in loads], dtype=float)
        fitted = isotonic_regression(mean, weights=weight, increasing=True).x
        crossing = None
        over = np.nonzero(fitted > 1)[0]
        if len(over) and over[0] > 0:
            i = int(over[0])
            x0, x1, y0, y1 = loads[i - 1], loads[i], fitted[i - 1], fitted[i]
            crossing = float(x0 + (1 - y0) * (x1 - x0) / (y1 - y0)) if y1 > y0 else float(x0)
        fits.append(
            {
                "slo": name,
                "loads": loads.tolist(),
                "fitted": [round(float(v), 4) for v in fitted],
                "crosses_at": None if crossing is None else round(crossing, 3),
            }
        )
    return fits


def between(spec: SearchSpec, a: float, b: float) -> float:
    """The next load between a pass ``a`` and a fail ``b``: their geometric mean."""
    mid = math.sqrt(a * b)
    if spec.whole:
        mid = float(min(max(round(mid), a + 1), b - 1))
    return mid


def next_load(spec: SearchSpec, points: Sequence[Point]) -> Decision:
    """The plan's next step after ``points`` (see the module docstring)."""
    unclear = [p for p in points if p.outcome == "cannot tell"]
    if unclear:
        p = unclear[0]
        return Decision(None, f"cannot tell at {spec.kind} {p.load:g}: {p.why}")
    if not points:
        return Decision(spec.lo, "start at the range's bottom")
    if len(points) >= spec.budget:
        return Decision(None, f"the budget of {spec.budget} runs is spent")
    b = bracket(points)
    top = max(p.load for p in points)
    if b.fails is None:
        if top >= spec.hi:
            return Decision(None, f"{spec.kind} {spec.hi:g}, the range's top, meets the SLOs")
        nxt = min(spec.hi, top * 2)
        return Decision(nxt, f"probing up: {spec.kind} {top:g} met the SLOs")
    if b.passes is None:
        if min(p.load for p in points) <= spec.lo:
            return Decision(None, f"{spec.kind} {spec.lo:g}, the range's bottom, fails")
        return Decision(spec.lo, "probing down to the range's bottom")
    if not b.closed(spec):
        mid = between(spec, b.passes, b.fails)
        return Decision(mid, f"bisecting between {b.passes:g} (met) and {b.fails:g} (missed)")
    for edge in (b.passes, b.fails):
        if sum(p.load == edge for p in points) < 2:
            return Decision(edge, f"confirming the bracket's edge {edge:g} with a second run")
    return Decision(None, "the bracket is closed and both edges are confirmed")
