"""Baseline (A) against candidate (B): statistics, side-by-side figures, equivalence.

Each side is one run or several (``loadtest ab --repeat``); requests of a side's runs are
pooled. Per latency metric the percentiles' differences get bootstrap intervals and the
distributions a rank test (``loadtest.measure.stats``), from the per-request records in
``requests.jsonl``, not from the summaries' percentiles. Run-level figures (completion,
validity, tokens per chunk, acceptance, memory, power, cold start) sit side by side, and
with several runs per side the run-to-run spread shows how much a single run can be
trusted. When both sides recorded outputs, identical prompts must have identical answers
(temperature 0): the match rate and the divergent prompts are listed, and a side's own
repeatability (one prompt answered differently on the same side) is measured, so that
only divergence beyond the baseline's own is laid at the candidate's door.

Before any verdict the comparison says what it could not judge (``compare_checks``): a
side that completed nothing, metrics with too few values, load beyond the endpoint,
sides run under different load shapes or prompt-cache states. Where the sides replayed
recorded agent sessions, what a decode speedup could save of session time and what the
candidate saved (``compare_sessions``).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np
import orjson

from loadtest.errors import ResultFileError, UsageError
from loadtest.measure.stats import (
    MIN_EFFECT,
    MetricComparison,
    PercentileDiff,
    compare_groups,
    judge_family,
    practical_effect,
)
from loadtest.model.comparison import (
    Comparison,
    DeploymentRun,
    MetricLines,
    SideJson,
    SpreadJson,
)
from loadtest.model.json import JsonObject
from loadtest.model.summary import Summary
from loadtest.report.acceptance import AcceptanceCounts, acceptance_lines, count_row, pooled
from loadtest.report.acceptance_time import StepRecords, side_acceptance
from loadtest.report.compare_checks import CacheUse, SideCounts, findings, load_shape
from loadtest.report.compare_figures import (
    SIDE_FIELDS,
    SideFigures,
    deployment_side,
    memory_added,
    side_figures,
    spread,
)
from loadtest.report.compare_parts import PartSamples, compare_parts
from loadtest.report.compare_render import line_verdict, render_comparison
from loadtest.report.compare_sessions import session_savings
from loadtest.report.equivalence import equivalence
from loadtest.report.rebuild import is_run_folder, summary_of
from loadtest.report.run_record import run_lines

__all__ = [
    "SIDE_FIELDS",
    "RunData",
    "compare_runs",
    "comparison_failed",
    "line_verdict",
    "load_run",
    "load_runs",
    "render_comparison",
]

METRICS = ("ttft_ms", "tpot_ms", "e2e_ms", "tool_call_ms")
PART_METRICS = ("ttfa_ms", "answer_ms")
"""Per category, of the requests that reasoned only: time to the first answer token and
the answer's own duration (``ab --sweep`` decides a reasoning category on them)."""


@dataclass(frozen=True, slots=True)
class RunData:
    """What a comparison reads from one run folder."""

    path: Path
    summary: Summary
    samples: dict[str, np.ndarray]
    """Per metric, the values of the measured ok requests (ms)."""
    outputs: dict[str, set[str]] = field(default_factory=dict)
    """Per prompt id, the digests of its answers (empty unless outputs were recorded)."""
    heads: dict[str, str] = field(default_factory=dict)
    answered: dict[str, int] = field(default_factory=dict)
    """Per prompt id, how many recorded answers it got (repeats show repeatability)."""
    sent: int = 0
    """Measured (not warm-up) requests in requests.jsonl."""
    drained: int = 0
    """Measured requests cancelled by the end-of-run drain (not by an injected fault)."""
    cache: CacheUse = field(default_factory=CacheUse)
    acceptance: dict[str, AcceptanceCounts] = field(default_factory=dict)
    """Per prompt category, the engine's draft counters and loadtest's steps."""
    deployment: DeploymentRun | None = None
    """What starting and serving this run cost (``deployment.json``; ab's managed sides)."""
    by_category: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    """``samples`` split by prompt category (the decision of ``ab --sweep``)."""
    ok_by_category: dict[str, int] = field(default_factory=dict)
    """Measured ok requests per prompt category."""
    steps: StepRecords = field(default_factory=StepRecords)
    """The verify steps of the measured ok requests (acceptance by position, over time)."""
    trace_calls: dict[str, list[float]] = field(default_factory=dict)
    """Per replayed call (``trace_id#call``, ``agent-trace``), its model time (ms) in
    each replay: the pairs of ``compare_sessions``."""
    parts: PartSamples = field(default_factory=PartSamples)
    """The requests that reasoned: each part's durations and tokens a step."""


def _deployment(folder: Path) -> DeploymentRun | None:
    path = folder / "deployment.json"
    if not path.exists():
        return None
    try:
        return cast(DeploymentRun, orjson.loads(path.read_bytes()))
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable deployment record ({exc})") from exc


def _rows(folder: Path) -> Iterator[JsonObject]:
    # A --workers run killed before its merge: its workers' lines (its summary is rebuilt
    # from them too); the merged file would not be there.
    try:
        for lines, _ in run_lines(folder):
            yield from lines
    except ResultFileError as exc:
        raise UsageError(f"{exc} (the requests of the run)") from exc


def _cache_use(summary: Summary, cached: int, computed: int) -> CacheUse:
    """llama.cpp's per-answer timings where the answers carried them, else vLLM's
    prefix-cache counters over the measured window (the summary's server block)."""
    if cached + computed:
        return CacheUse(cached, computed)
    server = summary.get("server")
    if not server:
        return CacheUse()
    hits, queries = server.get("prefix_cache_hits"), server.get("prefix_cache_queries")
    if hits is None or queries is None or not queries:
        return CacheUse()
    return CacheUse(hits, queries - hits, "prefix-cache counters")


def load_runs(path: str | Path) -> list[RunData]:
    """The runs of a side given on the command line: a run folder (a killed run's too:
    its summary is rebuilt), or a folder of run folders."""
    folder = Path(path)
    if is_run_folder(folder):
        return [load_run(folder)]
    runs = sorted(p for p in folder.glob("*") if is_run_folder(p))
    if not runs:
        raise UsageError(
            f"{folder}: no summary.json or requests.jsonl in it or in a folder in it: "
            "neither a run folder nor a folder of run folders"
        )
    return [load_run(p) for p in runs]


def load_run(run_dir: str | Path) -> RunData:
    """Summary, per-request samples and recorded outputs of one run folder."""
    folder = Path(run_dir)
    summary = summary_of(folder)
    values: dict[str, list[float]] = {m: [] for m in METRICS}
    outputs: dict[str, set[str]] = {}
    heads: dict[str, str] = {}
    answered: dict[str, int] = {}
    sent = drained = cached = computed = 0
    acceptance: dict[str, AcceptanceCounts] = {}
    per_cat: dict[str, dict[str, list[float]]] = {}
    steps = StepRecords()
    trace_calls: dict[str, list[float]] = {}
    parts = PartSamples()
    for row in _rows(folder):
        if row.get("warmup"):
            continue
        sent += 1
        if row.get("outcome") == "cancelled" and not row.get("injected_cancel"):
            drained += 1
        if row.get("outcome") != "ok":
            continue
        steps.add(row)
        timings = row.get("server_timings")
        if isinstance(timings, dict):
            n, p = timings.get("cache_n"), timings.get("prompt_n")
            if isinstance(n, int) and isinstance(p, int):
                cached, computed = cached + n, computed + p
            # A tool parser's bursts are not steps (RequestRecord.tokens_per_step).
            step_count = 0 if row.get("tool_calls") else row.get("token_steps")
            counted = count_row(row.get("output_tokens"), step_count, timings)
            if counted is not None:
                cat = str(row.get("category"))
                acceptance[cat] = acceptance.get(cat, AcceptanceCounts()) + counted
        if isinstance(row.get("trace_id"), str) and isinstance(row.get("e2e_ms"), int | float):
            trace_calls.setdefault(f"{row['trace_id']}#{row.get('call')}", []).append(
                float(row["e2e_ms"])
            )
        parts.add(row)
        cat_values = per_cat.setdefault(
            str(row.get("category")), {m: [] for m in (*METRICS, *PART_METRICS)}
        )
        for m in METRICS:
            v = row.get(m)
            if isinstance(v, int | float):
                values[m].append(float(v))
                cat_values[m].append(float(v))
        if row.get("reasoning_split") in ("field", "think-tags"):
            for m in PART_METRICS:  # a reasoning category's deciding metrics
                v = row.get(m)
                if isinstance(v, int | float):
                    cat_values[m].append(float(v))
        digest = row.get("output_sha256")
        if isinstance(digest, str):
            pid = str(row.get("prompt_id"))
            outputs.setdefault(pid, set()).add(digest)
            answered[pid] = answered.get(pid, 0) + 1
            heads.setdefault(pid, str(row.get("output_head") or ""))
    samples = {m: np.asarray(v) for m, v in values.items()}
    return RunData(
        folder,
        summary,
        samples,
        outputs,
        heads,
        answered,
        sent,
        drained,
        _cache_use(summary, cached, computed),
        acceptance,
        _deployment(folder),
        {c: {m: np.asarray(v) for m, v in vs.items()} for c, vs in per_cat.items()},
        {c: len(vs["e2e_ms"]) for c, vs in per_cat.items()},
        steps,
        trace_calls,
        parts,
    )


def _figures(runs: Sequence[RunData]) -> SideFigures:
    cache = CacheUse.pooled(r.cache for r in runs)
    return side_figures([r.summary for r in runs], cache)


def _side(runs: Sequence[RunData]) -> SideJson:
    side = _figures(runs).to_json()
    side["deployment_cost"] = deployment_side(
        [r.deployment for r in runs], [r.summary["throughput"]["output_tokens"] for r in runs]
    )
    side["acceptance"] = acceptance_lines(pooled(r.acceptance for r in runs))
    if any(r.steps.steps for r in runs):
        server = [r.summary.get("server") for r in runs]
        positions = [s.get("accepted_per_position") if s else None for s in server]
        steps = [(str(r.path), r.steps, p) for r, p in zip(runs, positions, strict=True)]
        said = {r.deployment.get("drafts") if r.deployment else None for r in runs}
        drafts = said.pop() if len(said) == 1 else None
        side["acceptance_time"] = side_acceptance(0.0, None, steps, drafts=drafts)
    return side


def _spread_json(runs: Sequence[RunData]) -> dict[str, dict[str, SpreadJson]]:
    return {
        m: {p: {"runs": list(s.runs), "stdev": s.stdev} for p, s in by_p.items()}
        for m, by_p in spread([r.samples for r in runs], METRICS).items()
    }


def _counts(name: str, runs: Sequence[RunData]) -> SideCounts:
    return SideCounts(
        name,
        sent=sum(r.sent for r in runs),
        # Measured completions: warm-up answers are no evidence for a comparison.
        ok=sum(r.summary["requests"].get("measured_ok", r.summary["requests"]["ok"]) for r in runs),
        drained=sum(r.drained for r in runs),
        values={m: sum(r.samples[m].size for r in runs) for m in METRICS},
        shapes=tuple(load_shape(r.summary) for r in runs),
        cache=CacheUse.pooled(r.cache for r in runs),
        rebuilt=sum("rebuilt" in r.summary for r in runs),
    )


def compare_runs(
    a: Sequence[RunData],
    b: Sequence[RunData],
    *,
    resamples: int = 2000,
    min_effect: float = MIN_EFFECT,
) -> Comparison:
    """The whole comparison as a JSON-ready dict (A = baseline, B = candidate).

    ``findings`` come first: ``blocking`` is true when no verdict stands (a side measured
    nothing, or too little), ``confounded`` when the sides differ in more than the
    deployment; every metric-percentile line carries its own verdict, judged with
    Holm's adjustment over all lines and the practical threshold ``min_effect``.
    """
    if not a or not b:
        raise UsageError("a comparison needs at least one run on each side")
    if not 0 <= min_effect < 1:
        raise UsageError(
            f"--min-effect must be a percentage between 0 and 100, not {min_effect:.0%}"
        )
    found = findings(_counts("A", a), _counts("B", b), METRICS)
    # One run on a side: its interval cannot hold what moved that whole run (stats).
    effect = practical_effect(len(a), len(b), min_effect)
    tested: list[MetricComparison] = []
    for m in METRICS:
        ga, gb = [r.samples[m] for r in a], [r.samples[m] for r in b]
        c = compare_groups(ga, gb, resamples=resamples, min_effect=effect)
        tested.append(c or _not_exercised(sum(g.size for g in ga), sum(g.size for g in gb)))
    judged = judge_family(tested)
    side_a, side_b = _side(a), _side(b)
    result: Comparison = {
        "findings": [f.to_json() for f in found],
        "blocking": any(f.blocking for f in found),
        "confounded": any(f.confounds for f in found),
        "min_effect": effect,
        "min_effect_asked": min_effect,
        "a": side_a,
        "b": side_b,
        # stats' own JSON, of the shape MetricLines names.
        "metrics": {
            m: cast(MetricLines, c.to_json()) for m, c in zip(METRICS, judged, strict=True)
        },
        "equivalence": equivalence(a, b),
        "memory_added": memory_added(side_a["deployment_cost"], side_b["deployment_cost"]),
    }
    savings = session_savings(
        [r.summary.get("agent_trace") for r in a],
        [r.summary.get("agent_trace") for r in b],
        _pooled_calls(a),
        _pooled_calls(b),
        effect,
    )
    if savings is not None:
        result["agent_trace"] = savings
    parts = compare_parts([r.parts for r in a], [r.parts for r in b], effect, resamples)
    if parts is not None:
        result["reasoning"] = parts
    if len(a) > 1 or len(b) > 1:
        result["spread"] = {side: _spread_json(runs) for side, runs in (("a", a), ("b", b))}
    return result


def _pooled_calls(runs: Sequence[RunData]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in runs:
        for key, values in r.trace_calls.items():
            out.setdefault(key, []).extend(values)
    return out


def _not_exercised(n_a: int, n_b: int) -> MetricComparison:
    line = PercentileDiff(
        50, math.nan, math.nan, math.nan, -math.inf, math.inf, verdict="not exercised"
    )
    return MetricComparison(n_a, n_b, (line,), None, "not exercised")


def comparison_failed(c: Comparison) -> bool:
    """True when the comparison cannot stand: nothing measured, or the sides not alike."""
    return c["blocking"] or c["confounded"]
