"""The capacity search's result (``capacity.json`` of ``sweep --search``)."""

from __future__ import annotations

from typing import Literal, TypedDict

__all__ = [
    "MarginFit",
    "SearchBracket",
    "SearchPoint",
    "SearchResult",
    "SearchSettings",
    "SloMargin",
]

Outcome = Literal["pass", "fail", "cannot tell"]


class SloMargin(TypedDict):
    """One SLO check of a run: its value over its limit (over 1: missed)."""

    slo: str
    margin: float


class SearchPoint(TypedDict):
    """One run of the search, in the order run."""

    load: float
    outcome: Outcome
    margins: list[SloMargin]
    why: str
    """For ``cannot tell``: why; for a point stopped as saturated: its evidence."""
    plan: str
    """Why the plan chose this load (probing, bisecting, confirming an edge)."""
    run: str
    """The run's folder, beside capacity.json."""


class SearchSettings(TypedDict):
    kind: str
    lo: float
    hi: float
    tolerance: float
    budget: int


class SearchBracket(TypedDict):
    passes: float | None
    """The highest load that meets the SLOs, by the monotone fit of every run."""
    fails: float | None
    """The lowest load above it that does not."""
    low: float | None
    """Every run passed at every load up to here."""
    high: float | None
    """Every run failed at every load from here: the boundary is in [low, high]."""
    closed: bool
    """One step wide (whole numbers) or within the tolerance."""


class MarginFit(TypedDict):
    """One SLO's margin (value over limit) fitted increasing in load."""

    slo: str
    loads: list[float]
    fitted: list[float]
    crosses_at: float | None
    """Where the fit crosses 1 (linear between the loads around it), if it does."""


class SearchResult(TypedDict):
    search: SearchSettings
    points: list[SearchPoint]
    runs: int
    bracket: SearchBracket
    fit: list[MarginFit]
    stopped_because: str
    answer: str
    interrupted: bool
