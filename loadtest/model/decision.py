"""``decision.json`` of ``loadtest ab --sweep``: the speculation decision across load.

TypedDicts for the same reason as ``model.comparison``: the decision *is* the file that
users' scripts and CI read by key, so the object built is the object written, checked
by mypy and validated by msgspec on the way back in (``io.load_decision``), with its
published schema generated from these types (``docs/decision.schema.json``).

Per prompt category, per load step, the candidate's effect on the category's deciding
metric (relative to the baseline, with its interval), judged with Holm's correction over
the whole sweep; per category, the bracket where the candidate stops paying.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

__all__ = [
    "CELL_VERDICTS",
    "AbSearch",
    "AcceptanceInterval",
    "Bracket",
    "CellVerdict",
    "Decision",
    "DecisionCell",
    "DecisionGate",
    "DecisionRow",
    "DecisionStep",
    "DraftPair",
    "DraftPick",
    "DraftSweep",
    "MemoryBudget",
    "RunAcceptance",
    "SearchCrossover",
    "SearchProbe",
    "SideAcceptance",
    "SideMemory",
    "StepCall",
]

CellVerdict = Literal["faster", "slower", "no difference", "cannot tell", "not exercised"]
"""The candidate at one load: ``faster``/``slower`` only when called after Holm's
correction over the whole sweep, beyond the interval and the practical threshold;
``no difference`` when tested and not called (not "the same"); ``cannot tell`` when
no test was trusted (too few values, a step whose comparison cannot stand, metrics that
disagree); ``not exercised`` when a side has no value at all."""
CELL_VERDICTS: tuple[CellVerdict, ...] = (
    "faster",
    "slower",
    "no difference",
    "cannot tell",
    "not exercised",
)


class DecisionCell(TypedDict):
    """One deciding metric of one category at one load step."""

    metric: str
    """``tool_call_ms``, ``e2e_ms``, ``tpot_ms`` (medians), or ``goodput_per_s``."""
    a: float | None
    """The baseline's value: the median (ms) of its runs' pooled requests, or its mean
    goodput per second over its runs."""
    b: float | None
    effect: float | None
    """(B - A) / A. Negative is faster for latencies; for goodput positive is more."""
    effect_low: float | None
    effect_high: float | None
    """The 95% interval of ``effect`` (None: unbounded, nothing tested)."""
    p_value: float | None
    p_holm: float | None
    """``p_value`` adjusted with Holm over the whole sweep's family."""
    threshold: float
    """The practical threshold ``|effect|`` had to reach, as a fraction of A."""
    verdict: CellVerdict
    why: str | None
    """Why ``cannot tell`` or ``not exercised``; None otherwise."""


class StepCall(TypedDict):
    """A category at one load: its deciding metrics' cells and their joint verdict."""

    load: float
    verdict: CellVerdict
    """``slower`` when a deciding metric is slower and none faster, ``faster`` the other
    way round, ``no difference`` when every one was tested and none called, else
    ``cannot tell`` (metrics that disagree, or one that could not be tested)."""
    cells: list[DecisionCell]


class Bracket(TypedDict):
    """Where the candidate stops paying for one category, in words and in loads."""

    text: str
    """E.g. ``faster up to 4 (e2e -31% [-35, -27]), slower from 8 (e2e +12% [8, 15])``,
    ``faster across the range``, ``cannot tell between 4 and 8``."""
    shape: str
    """The runs of verdicts in load order, e.g. ``faster, then slower``."""
    faster_to: float | None
    """The highest load at which the candidate is still faster, with no slower step
    below it."""
    slower_from: float | None
    """The first load above ``faster_to`` (or the first at all) at which it is slower."""
    crossover: float | None
    """Where the effect crosses zero, interpolated linearly between two neighbouring
    steps that were both called; None where no such pair brackets the change."""
    cannot_tell: list[float]
    """The loads that could not be called."""


class DecisionRow(TypedDict):
    """One row of the decision table: a category (or the whole mix's goodput)."""

    category: str
    draft_max: NotRequired[int]
    """With ``--draft-max``: the candidate's draft length this row judges (one row per
    category per draft length, each against the same baseline)."""
    deciding: list[str]
    """The deciding metrics, first the one the bracket quotes."""
    rule: str
    """Why these metrics: ``tool calls`` (time to a valid tool call), ``text`` (TPOT and
    end-to-end), or ``whole mix`` (goodput under the scenario's SLOs)."""
    steps: list[StepCall]
    bracket: Bracket


class DecisionStep(TypedDict):
    """One load step of the sweep: where its ``ab`` is, and what it could not judge."""

    load: float
    folder: str
    """The step's ``ab`` folder (its ``comparison.json``, ``baseline/``, ``candidate/``)."""
    blocked: str | None
    """Why the step's comparison cannot stand (nothing measured, unlike sides): its
    cells then say ``cannot tell``. None when it stands."""


class DecisionGate(TypedDict):
    """``--fail-on slower``: whether the candidate is slower where the gate looks."""

    fail_on: str
    operating_point: float | None
    """``--operating-point``: the one load gated; None gates every step."""
    failed: bool
    reasons: list[str]
    """One line per category and load found slower, e.g. ``concurrency 8: code slower
    (e2e +12% [8, 15])``."""


class DraftPair(TypedDict):
    """One draft length against the fastest one, on the time to a correct action."""

    k: int
    cell: DecisionCell
    """``a`` is the fastest K's median, ``b`` this K's; ``slower`` when called so after
    Holm over the whole family (the pair tests are counted in it)."""


class DraftPick(TypedDict):
    """Which draft length gives the shortest time to a correct action, at one load."""

    category: str
    load: float
    metric: str
    """The time to a correct action: ``tool_call_ms`` (tool calls) or ``e2e_ms`` (text)."""
    medians_ms: list[float | None]
    """Per draft length (``DraftSweep.values``), the median of its runs' pooled values."""
    best: int | None
    """The K called faster than every other K; None where none is (see ``tied``)."""
    tied: list[int]
    """The fastest K and those not told apart from it (one K when ``best`` is set)."""
    text: str
    """E.g. ``K=4 (K=1 +34% [28,41], K=16 +45% [39,52])`` or ``K=1, K=4 indistinguishable``."""
    pairs: list[DraftPair]


class DraftSweep(TypedDict):
    """``--draft-max 1,2,4``: the candidate at each draft length, and the best one."""

    setting: str
    """What was varied, e.g. ``llama.cpp speculative.draft.n_max`` or ``simulator spec_k``."""
    values: list[int]
    picks: list[DraftPick]


class AcceptanceInterval(TypedDict):
    """Tokens per verify step of one run's requests that ended in one interval."""

    start_s: float
    end_s: float
    """From the run's first send, in seconds."""
    steps: int
    tokens_per_step: float | None


class RunAcceptance(TypedDict):
    """One run of a speculative side over time."""

    folder: str
    intervals: list[AcceptanceInterval]
    collapse: str | None
    """E.g. ``acceptance collapsed at 2.1-2.6 s: 3.31 -> 1.00 tokens a verify step``:
    paying at the start, back to about one token a step later; None: no collapse seen
    (or too few steps to judge)."""


class SideAcceptance(TypedDict):
    """A candidate's speculative acceptance at one load: by position and over time."""

    load: float
    draft_max: int | None
    per_position: list[float]
    """P(the draft token at position k is accepted), k = 1, 2, ...; empty: not measured."""
    position_source: str
    """The server's counters, or derived as P(step >= k + 1) from the stream."""
    tokens_per_step: float | None
    """Mean tokens a verify step, over the side's runs (the prefill's token left out)."""
    runs: list[RunAcceptance]
    collapsed: bool


class SideMemory(TypedDict):
    """One side at one load against ``--memory-budget``."""

    load: float
    side: str
    """``baseline``, ``candidate`` or ``candidate-k4``."""
    deployment: str | None
    peak_mib: float | None
    """The peak resident memory over the step's runs of the side (None: not sampled)."""
    steady_mib: float | None
    fits: bool | None
    """None: cannot tell (a URL's server, or the simulator, is not sampled)."""
    headroom_mib: float | None
    """Budget - peak (negative: over)."""
    note: str


class MemoryBudget(TypedDict):
    """``--memory-budget 2GiB``: does each deployment fit, and with what headroom."""

    budget: str
    budget_mib: float
    fits: bool | None
    """True when every side at every step fits, False when one does not, None when some
    side cannot be told."""
    sides: list[SideMemory]


class SearchProbe(TypedDict):
    """One step of ``ab --search``, in the order run."""

    load: float
    plan: str
    """Why the plan chose this load (probing up, bisecting a category's bracket)."""
    alpha: float
    """The level its tests were judged at: its share of the search's alpha."""


class SearchCrossover(TypedDict):
    """Where one category's candidate stops paying, as the search found it."""

    category: str
    pays_to: float | None
    """The highest load where the candidate was faster, by a monotone fit of the steps."""
    stops_from: float | None
    """The lowest tested load above it where it was not faster."""
    closed: bool
    """One step wide (concurrency) or within the tolerance (rate)."""
    text: str


class AbSearch(TypedDict):
    """``ab --search KIND=LO..HI``: the plan, its error control and its answers."""

    kind: str
    lo: float
    hi: float
    tolerance: float
    max_steps: int
    alpha_per_step: float
    spending: str
    """How the search's alpha was spent over its steps, in words."""
    probes: list[SearchProbe]
    crossovers: list[SearchCrossover]
    stopped_because: str


class Decision(TypedDict):
    """The whole ``decision.json``."""

    kind: str
    """``concurrency`` or ``rate``."""
    loads: list[float]
    repeat: int
    alpha: float
    """The family-wise error rate of the whole sweep."""
    min_effect: float
    """The practical threshold used (the one-run bar with a single run a side)."""
    min_effect_asked: float
    family: str
    """How the family of tests under Holm's correction was formed, in words."""
    family_size: int
    resamples: int
    """Bootstrap resamples per test, enough that the smallest p-value, adjusted over the
    family, can still fall under ``alpha``."""
    steps: list[DecisionStep]
    rows: list[DecisionRow]
    interrupted: bool
    draft: NotRequired[DraftSweep]
    acceptance: NotRequired[list[SideAcceptance]]
    """Per load and candidate, its acceptance by position and over time."""
    memory: NotRequired[MemoryBudget]
    budget: NotRequired[str]
    """``--budget``: what it did to the repeats, in words."""
    gate: NotRequired[DecisionGate]
    search: NotRequired[AbSearch]
    """``ab --search``: the steps in the order the plan chose them, and the answers."""
