"""The ``comparison.json`` document of ``loadtest compare`` and ``loadtest ab``, as types.

TypedDicts for the same reason as ``model.verdict``: the comparison *is* the JSON file
that users' scripts read by key, so the object built is the object written, checked by
mypy, with no conversion layer between them. ``a`` is the baseline, ``b`` the candidate.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from loadtest.model.decision import SideAcceptance

__all__ = [
    "AcceptanceLine",
    "Comparison",
    "DeploymentRun",
    "DeploymentSide",
    "DivergentPrompt",
    "Equivalence",
    "FindingJson",
    "LineJson",
    "MetricLines",
    "OwnDivergence",
    "PartLine",
    "PartsComparison",
    "SessionSavings",
    "SessionSide",
    "SideJson",
    "SpreadJson",
]


class FindingJson(TypedDict):
    """One thing a reader must know before the verdicts (``compare_checks.Finding``)."""

    kind: str
    message: str
    blocking: bool


class LineJson(TypedDict):
    """One metric-percentile line: A, B, B - A with its interval, p-values, verdict."""

    a: float | None
    b: float | None
    diff: float | None
    ci_low: float | None
    ci_high: float | None
    significant: bool
    p_value: float | None
    p_holm: float | None
    threshold: float
    verdict: str


class MetricLines(TypedDict):
    """One latency metric: its lines (``p50``, ``p95``...) and the rank test."""

    n_a: int
    n_b: int
    p_value: float | None
    verdict: str
    percentiles: dict[str, LineJson]


class SpreadJson(TypedDict):
    """One percentile of one metric per run of a side, and the runs' stdev."""

    runs: list[float]
    stdev: float


class OwnDivergence(TypedDict):
    """A side's own repeatability: prompts answered more than once, and differently."""

    prompts_repeated: int
    divergent: int
    rate: float | None


class DivergentPrompt(TypedDict):
    """A prompt whose answers differ; ``own_a``: the baseline diverged on it too."""

    prompt_id: str
    a: str
    b: str
    own_a: bool


class Equivalence(TypedDict):
    """Output equivalence at temperature 0, net of the baseline's own divergence."""

    prompts_compared: int
    matching: int
    match_rate: float
    own_divergence: dict[str, OwnDivergence]
    attributed: int
    beyond_baseline: float
    divergent: list[DivergentPrompt]


class AcceptanceLine(TypedDict):
    """Speculative acceptance of one prompt category of a side, counted two ways.

    From the engine's per-response counters (llama.cpp ``timings``): ``engine_rate`` =
    accepted / drafted, and, since every verify step emits the target's own token plus
    the drafts it accepted and each response's first token comes from its prefill,
    decode steps = output tokens - accepted - responses, so ``engine_accepted_per_step``
    = accepted / (output - accepted - responses). From what loadtest saw on the stream:
    ``derived_accepted_per_step`` = tokens per step - 1 = (output - 1) / (bursts - 1) - 1,
    pooled over the streams (``report.acceptance``). ``agree``: loadtest's tokens per step
    is within ``tolerance`` (relative) of the engine's. (docs/metrics.md's catalogue.)
    """

    category: str
    responses: int
    output_tokens: int
    drafted: int
    accepted: int
    engine_rate: float | None
    engine_accepted_per_step: float | None
    derived_accepted_per_step: float | None
    tolerance: float
    agree: bool | None
    """None: one of the two figures is missing (no drafts, or no streamed steps)."""


class DeploymentRun(TypedDict):
    """What one managed start of a side cost (``deployment.json`` in its run folder)."""

    deployment: str
    """The side as given, e.g. ``llama:draft``."""
    drafts: NotRequired[bool | None]
    """Whether the side speculates, as given (None or absent: cannot tell)."""
    ready_s: float
    first_token_s: float | None
    first_token_error: str | None
    rss_steady_mib: float
    rss_peak_mib: float
    rss_samples: int
    energy_j: float | None
    energy_source: str | None
    energy_reason: str | None
    """Set when ``energy_j`` is None: why this machine cannot tell (never a 0)."""
    measured_s: float


class DeploymentSide(TypedDict):
    """A side's deployment cost over its runs, or why it was not measured."""

    deployment: str | None
    note: str | None
    """Set when nothing was measured, e.g. ``not measured: not a managed deployment``."""
    starts: int
    ready_s: float | None
    first_token_s: float | None
    rss_steady_mib: float | None
    """Median over the runs of each run's median sample."""
    rss_peak_mib: float | None
    energy_j_per_run: float | None
    energy_j_per_output_token: float | None
    energy: str
    """The energy in words: joules and source, or ``not available on this machine: ...``."""


class SideJson(TypedDict):
    """One side's run-level figures (``compare_figures.SideFigures``) and its costs."""

    runs: list[str]
    endpoint: str
    completion_rate: float | None
    validity_rate: float | None
    output_tokens_per_s: float | None
    tokens_per_chunk_p50: float | None
    acceptance_rate_timings: float | None
    acceptance_rate_metrics: float | None
    client_overhead_p50_ms: float | None
    target_rss_mib_peak: float | None
    gpu_memory_mib_peak: float | None
    gpu_power_w_peak: float | None
    time_to_ready_s: float | None
    restart_first_token_s: float | None
    prompt_cache_share: float | None
    deployment_cost: NotRequired[DeploymentSide]
    acceptance: NotRequired[list[AcceptanceLine]]
    acceptance_time: NotRequired[SideAcceptance]
    """The side's acceptance by draft position and over each run, and any collapse."""


class SessionSide(TypedDict):
    """One side's replayed agent sessions (``agent_trace``), per session, in ms: the mean
    over the sessions both sides replayed (each session's replays averaged first; of
    the sessions a run's summary lists, its first 100)."""

    runs: int
    """Runs of the side with an ``agent_trace`` section."""
    replays: int
    """Completed session replays listed in those runs."""
    session_ms: float | None
    ttft_ms: float | None
    decode_ms: float | None
    tools_ms: float | None
    other_ms: float | None


SavingsVerdict = Literal["saved", "added", "within noise", "cannot tell"]


class SessionSavings(TypedDict):
    """What the candidate did to session time, against what a decode speedup could save
    (``report.compare_sessions``)."""

    paired: int
    """Sessions (trace ids) replayed on both sides: the sample of the interval."""
    a: SessionSide
    b: SessionSide
    possible_ms: float | None
    """A's decode time per session: the most any decode speedup could save."""
    possible_share: float | None
    """``possible_ms`` over A's session time: the decode share of session time."""
    saved_ms: float | None
    """A's session time minus B's, per session (negative: B took longer)."""
    saved_share: float | None
    """``saved_ms`` over A's session time."""
    saved_of_possible: float | None
    """``saved_ms`` over ``possible_ms``: how much of what decode could give B gave."""
    paired_calls: int
    """Pairs of one call's replays, one on each side (a call replayed twice a side makes
    two): the sample of the test."""
    model_saved_ms: float | None
    """Per session, A's model time minus B's over the paired calls: the part of
    ``saved_ms`` the test and the interval are of."""
    ci_low_ms: float | None
    ci_high_ms: float | None
    """95% interval of ``model_saved_ms`` (bootstrap over the pairs)."""
    p_value: float | None
    """Sign-flip test of the pairs: how often chance alone gives a saving as far from 0."""
    threshold_ms: float | None
    """The smallest saving called (the comparison's practical effect of A's session time)."""
    verdict: SavingsVerdict
    reason: str
    """Why the verdict is what it is, in a sentence."""


class PartLine(TypedDict):
    """One part of the requests that reasoned (``reasoning`` or ``answer``), B against A."""

    part: str
    metric: str
    """``reasoning_ms`` (first reasoning chunk to first answer token) or ``answer_ms``."""
    a: float | None
    """The median duration of the part (ms) over the side's requests that reasoned."""
    b: float | None
    effect: float | None
    """(B - A) / A of the medians."""
    effect_low: float | None
    effect_high: float | None
    p_value: float | None
    p_holm: float | None
    """Holm over the parts."""
    verdict: str
    tokens_per_step_a: float | None
    """The part's tokens over the stream chunks that carried them (a verify step is a
    chunk): what a draft did to it."""
    tokens_per_step_b: float | None


class PartsComparison(TypedDict):
    """Reasoning models: what the candidate did to the reasoning and to the answer."""

    requests_a: int
    """Measured ok requests that reasoned, over the side's runs."""
    requests_b: int
    parts: list[PartLine]
    pays_in: list[str]
    """The parts called faster."""
    text: str


class Comparison(TypedDict):
    """The whole ``comparison.json``; ``ab`` adds its own keys (``repeat``...)."""

    findings: list[FindingJson]
    blocking: bool
    confounded: bool
    min_effect: float
    """The practical threshold used: ``--min-effect``, or the one-run bar when a side has
    a single run (``measure.stats.LONE_RUN_EFFECT``)."""
    min_effect_asked: float
    a: SideJson
    b: SideJson
    metrics: dict[str, MetricLines]
    spread: NotRequired[dict[str, dict[str, dict[str, SpreadJson]]]]
    equivalence: Equivalence | None
    agent_trace: NotRequired[SessionSavings]
    """Both or either side replayed agent sessions (``agent-trace``): what B saved."""
    reasoning: NotRequired[PartsComparison]
    """Either side's requests reasoned: the candidate's effect on each part."""
    memory_added: NotRequired[float | None]
    """B's steady RSS over A's, minus 1 (the share a draft adds); None unless both measured."""
    repeat: NotRequired[int]
    interrupted: NotRequired[bool]
    prompt_cache: NotRequired[str]
