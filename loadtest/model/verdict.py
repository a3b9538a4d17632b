"""Verdict types: fault windows, SLO checks, the driver's own health.

Each verdict word maps onto one of four states (``VerdictState``): positive, negative,
``inconclusive`` (the run could not tell) and ``not_exercised`` (nothing was tried).
The words stay the ones users and summary.json already know (``held``, ``met``,
``busy``...); ``STATE_OF`` says which state each means, so no reader guesses.

TypedDicts, not dataclasses: these are blocks of summary.json, written as JSON and read
back by key by our readers and by users' scripts; a TypedDict is that JSON, checked by
mypy, with no conversion layer that could drift from the file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, NotRequired, TypedDict

from loadtest.model.json import JsonObject

__all__ = [
    "STATE_OF",
    "Acceptance",
    "DriverHealth",
    "DriverVerdict",
    "FailOn",
    "FaultVerdict",
    "FaultVerdictWord",
    "Goodput",
    "Observed",
    "PhaseStats",
    "RequestRow",
    "SloBlock",
    "SloCheck",
    "SloVerdict",
    "VerdictState",
    "driver_verdict",
    "failing_windows",
    "untold_windows",
]

VerdictState = Literal["positive", "negative", "inconclusive", "not_exercised"]
"""The four states every verdict has room for."""

FaultVerdictWord = Literal["held", "degraded", "failed", "inconclusive", "skipped", "not_exercised"]
"""``degraded`` and ``failed`` are the negative state at two severities; ``not_exercised``:
the window injected nothing, measured nothing, or was never reached (``skipped``: the
fault could not be set up in this deployment)."""
FailOn = Literal["degraded", "failed", "never"]
"""The fault verdicts that make a run's command exit 1 (``--fail-on``)."""
SloVerdict = Literal["met", "missed", "inconclusive", "not_exercised"]
DriverVerdict = Literal["kept_up", "busy", "inconclusive", "not_exercised"]

STATE_OF: dict[str, VerdictState] = {
    "held": "positive",
    "degraded": "negative",
    "failed": "negative",
    "skipped": "not_exercised",
    "met": "positive",
    "missed": "negative",
    "kept_up": "positive",
    "busy": "negative",
    "inconclusive": "inconclusive",
    "not_exercised": "not_exercised",
}


class PhaseStats(TypedDict):
    """Counts and p50/p95 TTFT and TPOT of the requests sent in one phase of a window."""

    requests: int
    ok: int
    failed: int
    cancelled: int
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    tpot_p50_ms: float | None
    tpot_p95_ms: float | None


class Acceptance(TypedDict):
    """Draft acceptance rate before, during and after a window (None: not measured)."""

    before: float | None
    during: float | None
    after: float | None


class RequestRow(TypedDict):
    """The fields of a ``requests.jsonl`` line the verdicts read (times in ms from t0)."""

    sent_ms: float
    intended_ms: NotRequired[float]
    end_ms: float
    first_token_ms: float | None
    ttft_ms: float | None
    tpot_ms: float | None
    outcome: str
    warmup: bool
    error_class: str | None
    injected_cancel: NotRequired[bool | None]
    cancel_close_ms: NotRequired[float | None]


class RigObserved(TypedDict, total=False):
    """What the fault rig saw of a window as it played it, whatever its kind: in
    ``Observed`` while the run goes, and copied into the window's ``faults`` entry.

    Only what every kind may set, because the shared judge reads it: the fault could not
    be set up here (``skipped``) or could not be applied (``error``). What a kind sees of
    its own windows (a restart's ``time_to_ready_s``) it declares in its module, as its
    ``observed_model`` (``features.faults.entry``)."""

    skipped: str
    error: str


class Observed(RigObserved, total=False):
    """What the fault rig saw of one window as it played it (seconds from t0). Its
    kind's own keys sit beside these, typed by the kind's ``observed_model``."""

    start_s: float
    end_s: float
    not_reached: str
    """Why the window never started (the run ended first)."""
    detail: JsonObject
    """A plugin kind's own observations (loadtest's own kinds declare theirs as their
    ``observed_model``, written through ``top_observed``)."""


# With what the rig saw of any window (``RigObserved``), declared once for both: the
# docstring below is the schema's description. A kind's own figures (a cancel window's
# ``injected_cancels``) and what the rig saw of its windows (``settled_s``) are declared
# by the kind, in its module: summary.json's entries are this type with every registered
# kind's (``features.faults.entry``), made where the kinds can be found.
class FaultVerdict(RigObserved):
    """One ``faults`` entry of summary.json: what a window did and how it was judged."""

    name: str
    kind: str
    start_s: float
    end_s: float
    started_in_window: int
    failed_overlapping: int
    failed_by_class: dict[str, int]
    before: PhaseStats
    during: PhaseStats
    after: PhaseStats
    acceptance: Acceptance
    recovery_s: float | None
    verdict: FaultVerdictWord
    reason: str
    # a plugin kind's own observations and figures (docs/plugins.md)
    detail: NotRequired[JsonObject]


class SloCheck(TypedDict):
    """One objective: its limit, the run's value, and whether it was met."""

    slo: str
    limit: float
    value: float | None
    met: bool
    verdict: NotRequired[SloVerdict]  # absent from summaries written before it existed
    values: NotRequired[int]  # inconclusive: the values behind the figure,
    need: NotRequired[int]  # and the fewest its statistic can be told on


class Goodput(TypedDict):
    """Requests that met every per-request limit, in total, per second and as a share."""

    limits: dict[str, float]
    requests: int
    per_s: float
    share: float


class SloBlock(TypedDict):
    """The ``slo`` block: every check and whether all were met."""

    checks: list[SloCheck]
    met: bool
    goodput: NotRequired[Goodput]


class DriverHealth(TypedDict):
    """Whether loadtest itself kept up (the ``driver`` block)."""

    client_lag_p99_ms: float | None
    dispatch_lag_p99_ms: float | None
    kernel_stamped_share: float | None
    busy: bool
    advice: str | None


def driver_verdict(health: DriverHealth) -> DriverVerdict:
    """The driver block's state: ``busy``, ``kept_up``, or ``not_exercised`` (no lag seen)."""
    if health["busy"]:
        return "busy"
    if health["client_lag_p99_ms"] is None and health["dispatch_lag_p99_ms"] is None:
        return "not_exercised"
    return "kept_up"


_FAILING: dict[str, frozenset[str]] = {
    "failed": frozenset({"failed"}),
    "degraded": frozenset({"failed", "degraded"}),
    "never": frozenset(),
}


def untold_windows(faults: Sequence[FaultVerdict], fail_on: FailOn | str) -> list[FaultVerdict]:
    """The windows a ``--fail-on`` gate would otherwise pass on nothing: inconclusive or
    not exercised (never reached, nothing injected or measured). ``skipped`` is left
    out: that fault cannot be set up in this deployment, and the table says so."""
    if fail_on == "never":
        return []
    return [f for f in faults if f["verdict"] in ("inconclusive", "not_exercised")]


def failing_windows(faults: Sequence[FaultVerdict], fail_on: FailOn | str) -> list[FaultVerdict]:
    """The windows whose verdict is ``fail_on`` or worse (``never``: none).

    Only the negative state gates: a window that could not tell or was not exercised
    is not a pass either, but it says nothing against the endpoint.
    """
    if fail_on not in _FAILING:
        raise ValueError(f"fail_on must be one of {', '.join(_FAILING)}, not {fail_on!r}")
    return [f for f in faults if f["verdict"] in _FAILING[fail_on]]
