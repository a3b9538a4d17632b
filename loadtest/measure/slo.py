"""Service-level objectives: thresholds on the summary, and goodput per request.

A threshold is ``<metric>.<stat> <= limit`` (``ttft_ms.p95 = 500``) or ``error_rate <=
limit``. The run meets its SLOs when every threshold holds; ``loadtest run`` then exits
0, else 1, so CI can gate on it. Goodput counts the measured requests that met every
latency limit *individually* (a request with TTFT 600 ms misses ``ttft_ms.p95 = 500``
whatever the percentile says), per second: the throughput a user would call useful.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from loadtest.config.slo_table import (
    SLO_METRICS,
    SLO_STATS,
    SLOSpec,
    Threshold,
    parse_slo_flag,
    parse_slo_table,
)
from loadtest.model.record import RequestRecord
from loadtest.model.verdict import SloBlock, SloCheck, SloVerdict

# The specs are parsed with the scenario (config); re-exported: this is where SLOs live.
__all__ = [
    "SLO_METRICS",
    "SLO_STATS",
    "SLOSpec",
    "Threshold",
    "check",
    "evaluate",
    "parse_slo_flag",
    "parse_slo_table",
    "request_values",
    "requests_to_judge",
    "stat_of",
    "values_to_judge",
]


_TAIL = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99, "p999": 0.999}


def requests_to_judge(checks: Iterable[SloCheck]) -> int:
    """The fewest measured requests whose figures can tell each check's way."""
    return max((values_to_judge(c["slo"], c["limit"]) for c in checks), default=1)


def values_to_judge(label: str, limit: float) -> int:
    """The fewest values a threshold can be told on: one check's own sample-size rule.

    A percentile ``q`` needs one value above it, 1 / (1 - q) of them (a p99 of 6
    requests is their slowest, not a p99); a rate limit ``L`` needs the 1 / L requests in
    which one failure is the limit. A mean or a max is there from the first value.
    """
    _, _, stat = label.partition(".")
    if stat in _TAIL:
        return math.ceil(round(1 / (1 - _TAIL[stat]), 6))
    if not stat and limit > 0:  # error_rate
        return math.ceil(round(1 / limit, 6))
    return 1


def stat_of(metrics: Mapping[str, object], metric: str, stat: str) -> float | None:
    """``metrics[metric][stat]`` as a number, or None where the run has no such value."""
    block = metrics.get(metric)
    v = block.get(stat) if isinstance(block, Mapping) else None
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def check(t: Threshold, value: float | None, count: int | None = None) -> SloCheck:
    """One threshold judged against the run's value: the only place an SLO is judged.

    ``count`` is how many values stand behind ``value`` (the metric's, or the requests
    sent for the error rate); below ``values_to_judge`` the check is ``inconclusive``
    and not met, whichever side of the limit the value fell: a CI gate must not pass on
    a p99 that is the slowest of five requests.
    """
    # A metric with no values (no tool calls at all; no request sent for the error
    # rate) cannot be said to meet it.
    if value is None or count == 0:
        return _judged(t, None, "not_exercised")
    need = values_to_judge(t.label, t.limit)
    if count is not None and count < need:
        return {**_judged(t, value, "inconclusive"), "values": count, "need": need}
    return _judged(t, value, "met" if value <= t.limit else "missed")


def _judged(t: Threshold, value: float | None, verdict: SloVerdict) -> SloCheck:
    return {
        "slo": t.label,
        "limit": t.limit,
        "value": value,
        "met": verdict == "met",
        "verdict": verdict,
    }


def evaluate(
    spec: SLOSpec, metrics: Mapping[str, object], error_rate: float, sent: int | None = None
) -> SloBlock:
    """The ``slo`` block of summary.json: one check per threshold, and whether all met.

    ``sent`` (the requests behind the error rate) and each metric's ``count`` set the
    sample size each check is judged on; a caller without them gets no size rule.
    """
    checks = [
        check(t, error_rate, sent)
        if t.stat is None
        else check(t, stat_of(metrics, t.metric, t.stat), _count_of(metrics, t.metric))
        for t in spec.thresholds
    ]
    return {"checks": checks, "met": all(c["met"] for c in checks)}


def _count_of(metrics: Mapping[str, object], metric: str) -> int | None:
    count = stat_of(metrics, metric, "count")
    return None if count is None else int(count)


def request_values(rec: RequestRecord) -> dict[str, float | None]:
    """The per-request latencies goodput checks, in milliseconds."""
    tool = None if rec.tool_call_ns is None else (rec.tool_call_ns - rec.sent_ns) / 1e6
    tool_c = None if rec.tool_call_ns is None else (rec.tool_call_ns - rec.intended_ns) / 1e6
    ttft, ttfa = rec.ttft_ns, rec.ttfa_ns
    tpot = rec.tpot_ns
    answer = rec.first_answer_ns
    return {
        "ttft_ms": None if ttft is None else ttft / 1e6,
        "ttfa_ms": None if ttfa is None else ttfa / 1e6,
        "ttfa_ms_corrected": None if answer is None else (answer - rec.intended_ns) / 1e6,
        "tpot_ms": None if tpot is None else tpot / 1e6,
        "e2e_ms": (rec.end_ns - rec.sent_ns) / 1e6,
        "tool_call_ms": tool,
        "ttft_ms_corrected": None
        if rec.first_token_ns is None
        else (rec.first_token_ns - rec.intended_ns) / 1e6,
        "e2e_ms_corrected": (rec.end_ns - rec.intended_ns) / 1e6,
        "tool_call_ms_corrected": tool_c,
    }


def meets(limits: dict[str, float], rec: RequestRecord) -> bool:
    """True when an ok request is within every per-request limit (a missing value is not:
    a tool-call limit is missed by a request that made no valid call)."""
    if rec.outcome != "ok":
        return False
    values = request_values(rec)
    for metric, limit in limits.items():
        v = values.get(metric)
        if metric == "tpot_ms" and v is None:
            continue  # one-token answers have no TPOT; nothing to miss
        if v is None or v > limit:
            return False
    return True
