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
sides run under different load shapes or prompt-cache states.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from loadtest.errors import UsageError
from loadtest.measure.stats import (
    MIN_EFFECT,
    MetricComparison,
    PercentileDiff,
    compare_groups,
    format_p,
    judge_family,
    practical_effect,
)
from loadtest.model.json import JsonObject
from loadtest.report.compare_checks import CacheUse, SideCounts, findings, load_shape
from loadtest.report.compare_figures import SIDE_FIELDS, SideFigures, side_figures, spread
from loadtest.report.equivalence import equivalence

__all__ = [
    "SIDE_FIELDS",
    "RunData",
    "compare_runs",
    "comparison_failed",
    "line_verdict",
    "load_run",
    "load_summary",
    "render_comparison",
]

METRICS = ("ttft_ms", "tpot_ms", "e2e_ms", "tool_call_ms")


@dataclass(frozen=True, slots=True)
class RunData:
    """What a comparison reads from one run folder."""

    path: Path
    summary: JsonObject
    """summary.json as written (typed by its own model elsewhere; read here as JSON)."""
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


def load_summary(run_dir: str | Path) -> JsonObject:
    """The summary.json of a run folder; ``UsageError`` naming the path when missing."""
    path = Path(run_dir) / "summary.json"
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable summary.json of a run ({exc})") from exc
    if not isinstance(data, dict) or "metrics" not in data:
        raise UsageError(f"{path}: has no 'metrics'; is this a loadtest run folder?")
    return data


def _rows(path: Path) -> Iterator[JsonObject]:
    try:
        with open(path, "rb") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = orjson.loads(line)
                except orjson.JSONDecodeError as exc:
                    raise UsageError(f"{path}:{n}: not a JSON line ({exc})") from exc
                if isinstance(row, dict):
                    yield row
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the requests of the run ({exc.strerror})") from exc


def load_run(run_dir: str | Path) -> RunData:
    """Summary, per-request samples and recorded outputs of one run folder."""
    folder = Path(run_dir)
    summary = load_summary(folder)
    values: dict[str, list[float]] = {m: [] for m in METRICS}
    outputs: dict[str, set[str]] = {}
    heads: dict[str, str] = {}
    answered: dict[str, int] = {}
    sent = drained = cached = computed = 0
    for row in _rows(folder / "requests.jsonl"):
        if row.get("warmup"):
            continue
        sent += 1
        if row.get("outcome") == "cancelled" and not row.get("injected_cancel"):
            drained += 1
        if row.get("outcome") != "ok":
            continue
        timings = row.get("server_timings")
        if isinstance(timings, dict):
            n, p = timings.get("cache_n"), timings.get("prompt_n")
            if isinstance(n, int) and isinstance(p, int):
                cached, computed = cached + n, computed + p
        for m in METRICS:
            v = row.get(m)
            if isinstance(v, int | float):
                values[m].append(float(v))
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
        CacheUse(cached, computed),
    )


def _figures(runs: Sequence[RunData]) -> SideFigures:
    cache = CacheUse(sum(r.cache.cached for r in runs), sum(r.cache.computed for r in runs))
    return side_figures([r.summary for r in runs], cache)


def _spread_json(runs: Sequence[RunData]) -> JsonObject:
    return {
        m: {p: {"runs": list(s.runs), "stdev": s.stdev} for p, s in by_p.items()}
        for m, by_p in spread([r.samples for r in runs], METRICS).items()
    }


def _counts(name: str, runs: Sequence[RunData]) -> SideCounts:
    return SideCounts(
        name,
        sent=sum(r.sent or r.summary["requests"]["sent"] for r in runs),
        ok=sum(r.summary["requests"]["ok"] for r in runs),
        drained=sum(r.drained for r in runs),
        values={m: sum(r.samples[m].size for r in runs) for m in METRICS},
        shapes=tuple(load_shape(r.summary) for r in runs),
        cache=CacheUse(sum(r.cache.cached for r in runs), sum(r.cache.computed for r in runs)),
    )


def compare_runs(
    a: Sequence[RunData],
    b: Sequence[RunData],
    *,
    resamples: int = 2000,
    min_effect: float = MIN_EFFECT,
) -> JsonObject:
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
    result: JsonObject = {
        "findings": [f.to_json() for f in found],
        "blocking": any(f.blocking for f in found),
        "confounded": any(f.confounds for f in found),
        "min_effect": effect,
        "min_effect_asked": min_effect,
        "a": _figures(a).to_json(),
        "b": _figures(b).to_json(),
        "metrics": {m: c.to_json() for m, c in zip(METRICS, judged, strict=True)},
    }
    if len(a) > 1 or len(b) > 1:
        result["spread"] = {side: _spread_json(runs) for side, runs in (("a", a), ("b", b))}
    result["equivalence"] = equivalence(a, b)
    return result


def _not_exercised(n_a: int, n_b: int) -> MetricComparison:
    line = PercentileDiff(
        50, math.nan, math.nan, math.nan, -math.inf, math.inf, verdict="not exercised"
    )
    return MetricComparison(n_a, n_b, (line,), None, "not exercised")


def comparison_failed(c: JsonObject) -> bool:
    """True when the comparison cannot stand: nothing measured, or the sides not alike."""
    return bool(c.get("blocking") or c.get("confounded"))


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def line_verdict(c: JsonObject, d: JsonObject) -> str:
    """A line's verdict as printed: a confounded comparison says so beside it."""
    v = str(d["verdict"])
    return f"{v} (confounded)" if c.get("confounded") and v in ("faster", "slower") else v


def render_comparison(c: JsonObject) -> str:
    """The comparison as text: findings first, figures side by side, then latency lines."""
    a, b = c["a"], c["b"]
    lines = [
        f"{'STOP' if f['blocking'] else 'NOTE'}: {f['message']}" for f in c.get("findings", [])
    ]
    lines += [
        f"A (baseline)  = {', '.join(a['runs'])} ({a['endpoint']})",
        f"B (candidate) = {', '.join(b['runs'])} ({b['endpoint']})",
        "",
        f"{'':<26}{'A':>12}{'B':>12}",
    ]
    for key in SIDE_FIELDS:
        if a.get(key) is not None or b.get(key) is not None:
            lines.append(f"{key:<26}{_fmt(a.get(key)):>12}{_fmt(b.get(key)):>12}")
    effect = c.get("min_effect", MIN_EFFECT)
    head = f"{'latency (ms)':<14}{'pct':>5}{'A':>10}{'B':>10}{'B-A':>10}  {'95% CI of B-A':<22}"
    lines += ["", head + f"{'p (Holm)':<11}verdict (|B-A| >= {effect:.0%} of A)"]
    for m, mc in c["metrics"].items():
        if mc["verdict"] == "not exercised":
            lines.append(f"{m:<14}  not exercised (n={mc['n_a']}/{mc['n_b']})")
            continue
        for i, (p, d) in enumerate(mc["percentiles"].items()):
            ci = f"[{_num(d['ci_low'])}, {_num(d['ci_high'])}]" + ("*" if d["significant"] else "")
            lines.append(
                f"{m if i == 0 else '':<14}{p:>5}{_num(d['a']):>10}{_num(d['b']):>10}"
                f"{_num(d['diff']):>10}  {ci:<22}{format_p(d.get('p_holm')):<11}"
                f"{line_verdict(c, d)}"
            )
        lines.append(f"{'':<14}rank test p {format_p(mc['p_value'])}, n={mc['n_a']}/{mc['n_b']}")
    lines.append("(* the interval excludes 0; p adjusted over all lines of the comparison)")
    if len(a["runs"]) < 2 or len(b["runs"]) < 2:
        # Measured on a busy machine (benchmarks/bench_compare_fpr.py): identical simulators
        # flagged in 8% of one-run comparisons at 2%, 2% with the one-run bar.
        lines.append(
            f"(one run on a side: what moved that whole run is not in the intervals, so a "
            f"line needs |B-A| >= {effect:.0%} of A; two or more runs a side, as ab runs "
            "by default, put it there)"
        )
    for side, by_metric in (c.get("spread") or {}).items():
        for m, by_p in by_metric.items():
            runs = by_p["p50"]["runs"]
            lines.append(
                f"run-to-run {side} {m} p50: {', '.join(f'{v:.2f}' for v in runs)} "
                f"(stdev {by_p['p50']['stdev']:.2f})"
            )
    eq = c.get("equivalence")
    if eq:
        lines.append(
            f"\noutput equivalence: {eq['matching']}/{eq['prompts_compared']} prompts match "
            f"({eq['match_rate']:.1%}); {eq['attributed']} diverge only on B"
        )
        for side, own in eq["own_divergence"].items():
            lines.append(
                f"  {side.upper()}'s own repeatability: {own['divergent']} of "
                f"{own['prompts_repeated']} repeated prompts answered differently"
                if own["prompts_repeated"]
                else f"  {side.upper()}'s own repeatability: not measured (no prompt answered "
                "twice; ab --repeat 2 sends every prompt twice per side)"
            )
        for d in eq["divergent"][:10]:
            whose = " (A diverges too)" if d["own_a"] else ""
            lines.append(
                f"  DIVERGES {d['prompt_id']}{whose}: A {d['a'][:60]!r} / B {d['b'][:60]!r}"
            )
    return "\n".join(lines)
