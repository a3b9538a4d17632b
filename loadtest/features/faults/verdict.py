"""Verdicts on fault windows, from the per-request rows and the scraped server metrics.

Pure functions: the rows are ``requests.jsonl`` lines (times in ms from the run's
start), the samples ``metrics.jsonl`` lines, and what the rig observed. For each window
the requests are split by send time into *before* (the same length before the window,
5 to 30 s), *during* and *after*, and judged:

- ``failed``: more failed requests overlapped the window than it allows
  (``max_failures``), or cancelled streams kept their server slots;
- ``degraded``: no failures, but p95 TTFT or TPOT during the window grew past
  ``max_degradation`` times the level before, or latency had not recovered by the end;
- ``held``: neither.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from loadtest.features.faults.plan import PROXY_TOXICS, FaultEvent, FaultPlan
from loadtest.features.scrape import acceptance

__all__ = ["judge_windows", "phase_stats", "recovery_s"]

_SLACK_MS = 0.5  # absolute slack on "back within 10%": timer noise on fast endpoints


def _pct(values: Sequence[float], q: float) -> float | None:
    return round(float(np.percentile(values, q)), 3) if values else None


def phase_stats(rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Counts and p50/p95 of TTFT and TPOT of a set of rows (injected cancels apart)."""
    rows = list(rows)
    counts = Counter(r["outcome"] for r in rows)
    lat = [r for r in rows if r["outcome"] == "ok"]
    ttft = [r["ttft_ms"] for r in lat if r.get("ttft_ms") is not None]
    tpot = [r["tpot_ms"] for r in lat if r.get("tpot_ms") is not None]
    return {
        "requests": len(rows),
        "ok": counts["ok"],
        "failed": counts["failed"],
        "cancelled": counts["cancelled"],
        "ttft_p50_ms": _pct(ttft, 50),
        "ttft_p95_ms": _pct(ttft, 95),
        "tpot_p50_ms": _pct(tpot, 50),
        "tpot_p95_ms": _pct(tpot, 95),
    }


def recovery_s(
    rows: Sequence[dict[str, Any]], end_ms: float, before: dict[str, Any], tolerance: float
) -> float | None:
    """Seconds after ``end_ms`` until the median TTFT and TPOT of a 1 s slice of sends
    are back within ``tolerance`` of the level before; None if they never are."""
    base_ttft, base_tpot = before.get("ttft_p50_ms"), before.get("tpot_p50_ms")
    if base_ttft is None:
        return None
    last = max((r["sent_ms"] for r in rows), default=end_ms)
    second = 0
    while end_ms + second * 1000 <= last:
        lo, hi = end_ms + second * 1000, end_ms + (second + 1) * 1000
        ok = [r for r in rows if lo <= r["sent_ms"] < hi and r["outcome"] == "ok"]
        ttft = [r["ttft_ms"] for r in ok if r.get("ttft_ms") is not None]
        tpot = [r["tpot_ms"] for r in ok if r.get("tpot_ms") is not None]
        if ttft and float(np.median(ttft)) <= base_ttft * (1 + tolerance) + _SLACK_MS:
            if base_tpot is None or not tpot:
                return float(second)
            if float(np.median(tpot)) <= base_tpot * (1 + tolerance) + _SLACK_MS:
                return float(second)
        second += 1
    return None


def _between(
    samples: Sequence[dict[str, Any]], a_s: float, b_s: float, *, inner: bool
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Two good samples bounding the span ``a_s``..``b_s``.

    ``inner``: the first sample at or after ``a_s`` and the last at or before ``b_s``
    (nothing from outside the span leaks in: rates *within* it). Otherwise the last
    sample at or before ``a_s`` and the first at or after ``b_s`` (every change that
    happened in the span is caught: counts of events).
    """
    ok = [s for s in samples if s.get("ok")]
    # A scrape reads the server at some moment between its request (t_s) and its
    # answer (t_end_s); under load that gap is not small, so each bound takes the side
    # that keeps the reading on the correct side of the span edge.
    if inner:
        inside = [s for s in ok if a_s <= s["t_s"] and _answered_s(s) <= b_s]
        return (inside[0], inside[-1]) if len(inside) >= 2 else (None, None)
    if not ok:
        return None, None
    first = next((s for s in reversed(ok) if _answered_s(s) <= a_s), ok[0])
    last = next((s for s in ok if s["t_s"] >= b_s), ok[-1])
    return first, last


def _answered_s(sample: dict[str, Any]) -> float:
    return float(sample.get("t_end_s", sample["t_s"]))


def _acceptance(samples: Sequence[dict[str, Any]], a_s: float, b_s: float) -> float | None:
    first, last = _between(samples, a_s, b_s, inner=True)
    if first is None or last is None or first is last:
        return None
    rate = acceptance(first, last)
    return None if rate is None else round(rate, 4)


def judge_windows(
    plan: FaultPlan,
    observed: Sequence[dict[str, Any]],
    rows: Sequence[dict[str, Any]],
    samples: Sequence[dict[str, Any]],
) -> list[dict[str, Any]]:
    """One ``summary.json`` ``faults`` entry per event of ``plan``."""
    measured = [r for r in rows if not r.get("warmup")]
    return [
        _judge(plan, ev, obs, measured, samples)
        for ev, obs in zip(plan.events, observed, strict=True)
    ]


def _judge(
    plan: FaultPlan,
    ev: FaultEvent,
    obs: dict[str, Any],
    rows: Sequence[dict[str, Any]],
    samples: Sequence[dict[str, Any]],
) -> dict[str, Any]:
    start_s = float(obs.get("start_s", ev.at_s))
    end_s = float(obs.get("end_s", ev.end_s))
    start, end = start_s * 1000, end_s * 1000
    span = min(max(end - start, 5000.0), 30000.0)
    before = [r for r in rows if start - span <= r["sent_ms"] < start]
    during = [r for r in rows if start <= r["sent_ms"] < end]
    after_all = [r for r in rows if r["sent_ms"] >= end]
    after = [r for r in after_all if r["sent_ms"] < end + span]
    overlap_failed = [
        r for r in rows if r["outcome"] == "failed" and r["sent_ms"] < end and r["end_ms"] >= start
    ]
    entry: dict[str, Any] = {
        "name": ev.label,
        "kind": ev.kind,
        "start_s": round(start_s, 3),
        "end_s": round(end_s, 3),
        "started_in_window": len(during),
        "failed_overlapping": len(overlap_failed),
        "failed_by_class": dict(Counter(r["error_class"] for r in overlap_failed)),
        "before": phase_stats(before),
        "during": phase_stats(r for r in during if not r.get("injected_cancel")),
        "after": phase_stats(after),
        "acceptance": {
            "before": _acceptance(samples, start_s - span / 1000, start_s),
            "during": _acceptance(samples, start_s, end_s),
            "after": _acceptance(samples, end_s, end_s + span / 1000),
        },
    }
    b = entry["before"]
    entry["recovery_s"] = recovery_s(after_all, end, b, plan.recovery_tolerance)
    entry.update({k: v for k, v in obs.items() if k not in ("start_s", "end_s")})
    if ev.kind == "cancel":
        entry.update(_cancel_figures(during))
    if ev.kind == "restart":
        entry.update(_restart_figures(rows, start, obs))
    if ev.kind in PROXY_TOXICS:
        entry["fallbacks"] = _delta(samples, "fallbacks", start_s, end_s)
    verdict, reason = _verdict(plan, ev, entry, bool(after))
    entry["verdict"] = verdict
    entry["reason"] = reason
    return entry


def _cancel_figures(during: Sequence[dict[str, Any]]) -> dict[str, Any]:
    cancelled = [r for r in during if r.get("injected_cancel")]
    close = [r["cancel_close_ms"] for r in cancelled if r.get("cancel_close_ms") is not None]
    return {
        "injected_cancels": len(cancelled),
        "cancel_close_p50_ms": _pct(close, 50),
        "cancel_close_max_ms": round(max(close), 3) if close else None,
    }


def _restart_figures(
    rows: Sequence[dict[str, Any]], start: float, obs: dict[str, Any]
) -> dict[str, Any]:
    caught = [r for r in rows if r["sent_ms"] < start <= r["end_ms"]]
    firsts = [
        r["first_token_ms"]
        for r in rows
        if r["outcome"] == "ok" and r["sent_ms"] >= start and r.get("first_token_ms") is not None
    ]
    return {
        "caught_in_flight": len(caught),
        "caught_failed": sum(1 for r in caught if r["outcome"] == "failed"),
        "time_to_first_token_s": round((min(firsts) - start) / 1000, 4) if firsts else None,
    }


def _verdict(
    plan: FaultPlan, ev: FaultEvent, e: dict[str, Any], has_after: bool
) -> tuple[str, str]:
    if "skipped" in e:
        return "skipped", e["skipped"]
    if "error" in e:
        return "failed", f"the fault could not be applied: {e['error']}"
    failed = e["failed_overlapping"]
    if failed > ev.max_failures:
        classes = ", ".join(f"{n} {c}" for c, n in e["failed_by_class"].items())
        return "failed", f"{failed} requests failed around the window ({classes})"
    if ev.kind == "cancel" and e.get("settled_s", 0) is None:
        return "failed", (
            f"the endpoint still ran {e.get('running_excess')} more requests than the client "
            f"had open {ev.settle_s:g} s after the cancellations: cancelled streams kept slots"
        )
    reasons = []
    b, d = e["before"], e["during"]
    for metric in ("ttft_p95_ms", "tpot_p95_ms"):
        if b.get(metric) and d.get(metric):
            ratio = d[metric] / b[metric]
            if ratio > plan.max_degradation:
                reasons.append(
                    f"{metric[:4].upper()} p95 grew {ratio:.1f}x in the window "
                    f"(bound {plan.max_degradation:g}x)"
                )
    if has_after and b.get("ttft_p50_ms") is not None and e["recovery_s"] is None:
        reasons.append("latency did not come back within 10% of before by the end of the run")
    if reasons:
        return "degraded", "; ".join(reasons)
    if not e["started_in_window"] and ev.kind not in ("idle", "restart"):
        return "held", "no failures (but no request started in the window)"
    what = "kept serving"
    if e.get("fallbacks"):
        what = f"fell back to plain decoding ({e['fallbacks']:g} fallbacks)"
    return "held", f"no failures; the endpoint {what} within the latency bound"


def _delta(samples: Sequence[dict[str, Any]], field: str, a_s: float, b_s: float) -> float | None:
    first, last = _between(samples, a_s, b_s, inner=False)
    if first is None or last is None or field not in first or field not in last:
        return None
    return float(last[field]) - float(first[field])
