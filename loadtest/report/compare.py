"""Baseline (A) against candidate (B): statistics, side-by-side figures, equivalence.

Each side is one run or several (``loadtest ab --repeat``); requests of a side's runs are
pooled. Per latency metric the percentiles' differences get bootstrap intervals and the
distributions a rank test (``loadtest.measure.stats``), from the per-request records in
``requests.jsonl``, not from the summaries' percentiles. Run-level figures (completion,
validity, tokens per chunk, acceptance, memory, power, cold start) sit side by side, and
with several runs per side the run-to-run spread shows how much a single run can be
trusted. When both sides recorded outputs, identical prompts must have identical answers
(temperature 0): the match rate and the divergent prompts are listed.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from loadtest.errors import UsageError
from loadtest.measure.stats import compare_samples

__all__ = ["RunData", "compare_runs", "load_run", "load_summary", "render_comparison"]

METRICS = ("ttft_ms", "tpot_ms", "e2e_ms", "tool_call_ms")


@dataclass(frozen=True, slots=True)
class RunData:
    """What a comparison reads from one run folder."""

    path: Path
    summary: dict[str, Any]
    samples: dict[str, np.ndarray]
    """Per metric, the values of the measured ok requests (ms)."""
    outputs: dict[str, set[str]] = field(default_factory=dict)
    """Per prompt id, the digests of its answers (empty unless outputs were recorded)."""
    heads: dict[str, str] = field(default_factory=dict)


def load_summary(run_dir: str | Path) -> dict[str, Any]:
    """The summary.json of a run folder; ``UsageError`` naming the path when missing."""
    path = Path(run_dir) / "summary.json"
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UsageError(f"{path}: not a readable summary.json of a run ({exc})") from exc
    if not isinstance(data, dict) or "metrics" not in data:
        raise UsageError(f"{path}: has no 'metrics'; is this a loadtest run folder?")
    return data


def _rows(path: Path) -> Iterator[dict[str, Any]]:
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
    for row in _rows(folder / "requests.jsonl"):
        if row.get("warmup") or row.get("outcome") != "ok":
            continue
        for m in METRICS:
            v = row.get(m)
            if isinstance(v, int | float):
                values[m].append(float(v))
        digest = row.get("output_sha256")
        if isinstance(digest, str):
            pid = str(row.get("prompt_id"))
            outputs.setdefault(pid, set()).add(digest)
            heads.setdefault(pid, str(row.get("output_head") or ""))
    samples = {m: np.asarray(v) for m, v in values.items()}
    return RunData(folder, summary, samples, outputs, heads)


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.fmean(known), 4) if known else None


def _peak(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def _side(runs: Sequence[RunData]) -> dict[str, Any]:
    sums = [r.summary for r in runs]
    sent = sum(s["requests"]["sent"] for s in sums)
    ok = sum(s["requests"]["ok"] for s in sums)
    calls = sum(s.get("tool_calls", {}).get("responses_with_calls", 0) for s in sums)
    valid = sum(s.get("tool_calls", {}).get("valid", 0) for s in sums)
    timings = [s.get("server_timings") or {} for s in sums]
    server = [s.get("server") or {} for s in sums]
    restarts = [
        f.get("time_to_first_token_s")
        for s in sums
        for f in s.get("faults") or []
        if f.get("kind") == "restart"
    ]
    return {
        "runs": [s["run"]["id"] for s in sums],
        "endpoint": sums[0]["run"]["endpoint"],
        "completion_rate": round(ok / sent, 4) if sent else None,
        "validity_rate": round(valid / calls, 4) if calls else None,
        "output_tokens_per_s": _mean([s["throughput"]["output_tokens_per_s"] for s in sums]),
        "tokens_per_chunk_p50": _mean([s.get("tokens_per_chunk", {}).get("p50") for s in sums]),
        "acceptance_rate_timings": _mean([t.get("acceptance_rate") for t in timings]),
        "acceptance_rate_metrics": _mean([v.get("acceptance_rate") for v in server]),
        "client_overhead_p50_ms": _mean(
            [(t.get("client_overhead_ms") or {}).get("p50") for t in timings]
        ),
        "target_rss_mib_peak": _peak([v.get("target_rss_mib_peak") for v in server]),
        "gpu_memory_mib_peak": _peak([v.get("gpu_memory_mib_peak") for v in server]),
        "gpu_power_w_peak": _peak([v.get("gpu_power_w_peak") for v in server]),
        "time_to_ready_s": _mean([s["run"].get("target_time_to_ready_s") for s in sums]),
        "restart_first_token_s": _mean(restarts),
    }


SIDE_FIELDS = (
    "completion_rate",
    "validity_rate",
    "output_tokens_per_s",
    "tokens_per_chunk_p50",
    "acceptance_rate_timings",
    "acceptance_rate_metrics",
    "client_overhead_p50_ms",
    "target_rss_mib_peak",
    "gpu_memory_mib_peak",
    "gpu_power_w_peak",
    "time_to_ready_s",
    "restart_first_token_s",
)


def _spread(runs: Sequence[RunData]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for m in METRICS:
        per_run = {
            p: [round(float(np.percentile(r.samples[m], q)), 3) for r in runs if r.samples[m].size]
            for p, q in (("p50", 50), ("p95", 95))
        }
        if len(per_run["p50"]) > 1:
            out[m] = {
                p: {"runs": v, "stdev": round(statistics.stdev(v), 3)} for p, v in per_run.items()
            }
    return out


def equivalence(a: Sequence[RunData], b: Sequence[RunData]) -> dict[str, Any] | None:
    """Match rate of answers to the same prompt; None unless both sides recorded them."""
    oa: dict[str, set[str]] = {}
    ob: dict[str, set[str]] = {}
    for runs, into in ((a, oa), (b, ob)):
        for r in runs:
            for pid, digests in r.outputs.items():
                into.setdefault(pid, set()).update(digests)
    common = sorted(set(oa) & set(ob))
    if not common:
        return None
    heads_a = {k: v for r in a for k, v in r.heads.items()}
    heads_b = {k: v for r in b for k, v in r.heads.items()}
    # With temperature 0 every answer to a prompt must be the same, within a side too.
    divergent = [p for p in common if len(oa[p] | ob[p]) > 1]
    return {
        "prompts_compared": len(common),
        "matching": len(common) - len(divergent),
        "match_rate": round(1 - len(divergent) / len(common), 4),
        "divergent": [
            {"prompt_id": p, "a": heads_a.get(p, ""), "b": heads_b.get(p, "")}
            for p in divergent[:50]
        ],
    }


def compare_runs(
    a: Sequence[RunData], b: Sequence[RunData], *, resamples: int = 2000
) -> dict[str, Any]:
    """The whole comparison as a JSON-ready dict (A = baseline, B = candidate)."""
    if not a or not b:
        raise UsageError("a comparison needs at least one run on each side")
    metrics: dict[str, Any] = {}
    for m in METRICS:
        xa = np.concatenate([r.samples[m] for r in a])
        xb = np.concatenate([r.samples[m] for r in b])
        c = compare_samples(xa, xb, resamples=resamples)
        if c is not None:
            metrics[m] = c.to_json()
    result: dict[str, Any] = {"a": _side(a), "b": _side(b), "metrics": metrics}
    if len(a) > 1 or len(b) > 1:
        result["spread"] = {"a": _spread(a), "b": _spread(b)}
    result["equivalence"] = equivalence(a, b)
    return result


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _p(p: float | None) -> str:
    if p is None:
        return " -"
    return "<0.0001" if p < 1e-4 else f"={p:.4f}"


def render_comparison(c: dict[str, Any]) -> str:
    """The comparison as text: figures side by side, then latency with intervals."""
    a, b = c["a"], c["b"]
    lines = [
        f"A (baseline)  = {', '.join(a['runs'])} ({a['endpoint']})",
        f"B (candidate) = {', '.join(b['runs'])} ({b['endpoint']})",
        "",
        f"{'':<26}{'A':>12}{'B':>12}",
    ]
    for key in SIDE_FIELDS:
        if a[key] is not None or b[key] is not None:
            lines.append(f"{key:<26}{_fmt(a[key]):>12}{_fmt(b[key]):>12}")
    head = f"{'latency (ms)':<14}{'pct':>5}{'A':>10}{'B':>10}{'B-A':>10}  {'95% CI of B-A':<22}"
    lines += ["", head + "verdict (rank test p)"]
    for m, mc in c["metrics"].items():
        verdict = f"{mc['verdict']} (p{_p(mc['p_value'])}, n={mc['n_a']}/{mc['n_b']})"
        for i, (p, d) in enumerate(mc["percentiles"].items()):
            ci = f"[{d['ci_low']:.2f}, {d['ci_high']:.2f}]" + ("*" if d["significant"] else "")
            lines.append(
                f"{m if i == 0 else '':<14}{p:>5}{d['a']:>10.2f}{d['b']:>10.2f}{d['diff']:>10.2f}"
                f"  {ci:<22}{verdict if i == 0 else ''}"
            )
    lines.append("(* the interval excludes 0)")
    for side, spread in (c.get("spread") or {}).items():
        for m, by_p in spread.items():
            runs = by_p["p50"]["runs"]
            lines.append(
                f"run-to-run {side} {m} p50: {', '.join(f'{v:.2f}' for v in runs)} "
                f"(stdev {by_p['p50']['stdev']:.2f})"
            )
    eq = c.get("equivalence")
    if eq:
        lines.append(
            f"\noutput equivalence: {eq['matching']}/{eq['prompts_compared']} prompts match "
            f"({eq['match_rate']:.1%})"
        )
        for d in eq["divergent"][:10]:
            lines.append(f"  DIVERGES {d['prompt_id']}: A {d['a'][:60]!r} / B {d['b'][:60]!r}")
    return "\n".join(lines)
