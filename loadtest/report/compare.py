"""Side by side: two finished runs' summaries (baseline A, candidate B).

The percentile differences here are plain differences of two runs; they say nothing on
whether a difference is stable or noise (bootstrap intervals and rank tests belong to the
capacity-and-comparison work that builds on this).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from loadtest.errors import UsageError

__all__ = ["compare_summaries", "load_summary", "render_comparison"]

_METRICS = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "tool_call_ms")
_PCTS = ("p50", "p95", "p99")


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


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(b / a, 4) if a and b is not None else None


def compare_summaries(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Per metric and percentile: A, B, B - A and B / A; and the run-level figures."""
    metrics: dict[str, Any] = {}
    for m in _METRICS:
        sa, sb = a["metrics"].get(m, {}), b["metrics"].get(m, {})
        if not sa.get("count") or not sb.get("count"):
            continue
        metrics[m] = {
            p: {
                "a": sa[p],
                "b": sb[p],
                "diff": round(sb[p] - sa[p], 4),
                "ratio": _ratio(sa[p], sb[p]),
            }
            for p in _PCTS
        }

    def side(s: dict[str, Any]) -> dict[str, Any]:
        req, thr = s["requests"], s["throughput"]
        st = s.get("server_timings") or {}
        server = s.get("server") or {}
        return {
            "run": s["run"]["id"],
            "endpoint": s["run"]["endpoint"],
            "completion_rate": round(req["ok"] / req["sent"], 4) if req["sent"] else None,
            "output_tokens_per_s": thr["output_tokens_per_s"],
            "acceptance_rate_timings": st.get("acceptance_rate"),
            "acceptance_rate_metrics": server.get("acceptance_rate"),
            "client_overhead_p50_ms": (st.get("client_overhead_ms") or {}).get("p50"),
        }

    return {"a": side(a), "b": side(b), "metrics": metrics}


def render_comparison(c: dict[str, Any]) -> str:
    """The comparison as a text table."""
    lines = [
        f"A = {c['a']['run']} ({c['a']['endpoint']})",
        f"B = {c['b']['run']} ({c['b']['endpoint']})",
    ]
    for key in (
        "completion_rate",
        "output_tokens_per_s",
        "acceptance_rate_timings",
        "acceptance_rate_metrics",
        "client_overhead_p50_ms",
    ):
        lines.append(f"{key:<26}{c['a'][key]!s:>12}{c['b'][key]!s:>12}")
    lines.append(f"\n{'latency (ms)':<18}{'pct':>5}{'A':>12}{'B':>12}{'B-A':>12}{'B/A':>8}")
    for m, pcts in c["metrics"].items():
        for p, v in pcts.items():
            ratio = "-" if v["ratio"] is None else f"{v['ratio']:.2f}"
            lines.append(f"{m:<18}{p:>5}{v['a']:>12.2f}{v['b']:>12.2f}{v['diff']:>12.2f}{ratio:>8}")
    return "\n".join(lines)
