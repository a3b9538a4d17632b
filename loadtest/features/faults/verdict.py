"""Verdicts on fault windows, from the per-request rows and the scraped server metrics.

Pure functions: the rows are ``requests.jsonl`` lines (times in ms from the run's
start), the samples ``metrics.jsonl`` lines, and what the rig observed. For each window
the requests are split by send time into *before* (the same length before the window,
5 to 30 s), *during* and *after*, and judged:

- ``failed``: more failed requests overlapped the window than it allows
  (``max_failures``), or cancelled streams kept their server slots;
- ``not_exercised``: the run ended before the window, the window injected nothing (a
  cancel window that cancelled no request) or no request started in it;
- ``degraded``: no failures, but p95 TTFT or TPOT during the window grew past
  ``max_degradation`` times the level before, or latency had not come back to the
  level before (within that phase's own spread: see ``recovery``) by the end;
- ``inconclusive``: too few completed requests before or after the window to compare;
- ``held``: none of these.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from loadtest.features.faults.plan import PROXY_TOXICS, FaultEvent, FaultPlan
from loadtest.features.faults.recovery import MIN_REQUESTS, Baseline, recovery_s
from loadtest.features.server_summary import acceptance
from loadtest.measure.hdr import percentile
from loadtest.model.json import JsonObject
from loadtest.model.verdict import (
    CancelFigures,
    FaultVerdict,
    FaultVerdictWord,
    Observed,
    PhaseStats,
    RequestRow,
    RestartFigures,
)

__all__ = ["after_span_s", "judge_windows", "phase_stats", "recovery_s"]


def _pct(values: Sequence[float], q: float) -> float | None:
    p = percentile(values, q)
    return None if p is None else round(p, 3)


def phase_stats(rows: Iterable[RequestRow]) -> PhaseStats:
    """Counts and p50/p95 of TTFT and TPOT of a set of rows (injected cancels apart)."""
    rows = list(rows)
    counts = Counter(r["outcome"] for r in rows)
    lat = [r for r in rows if r["outcome"] == "ok"]
    ttft = [r["ttft_ms"] for r in lat if r["ttft_ms"] is not None]
    tpot = [r["tpot_ms"] for r in lat if r["tpot_ms"] is not None]
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


def _between(
    samples: Sequence[JsonObject], a_s: float, b_s: float, *, inner: bool
) -> tuple[JsonObject | None, JsonObject | None]:
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


def _answered_s(sample: JsonObject) -> float:
    return float(sample.get("t_end_s") or sample["t_s"])


def _acceptance(samples: Sequence[JsonObject], a_s: float, b_s: float) -> float | None:
    first, last = _between(samples, a_s, b_s, inner=True)
    if first is None or last is None or first is last:
        return None
    rate = acceptance(first, last)
    return None if rate is None else round(rate, 4)


def judge_windows(
    plan: FaultPlan,
    observed: Sequence[Observed],
    rows: Sequence[RequestRow],
    samples: Sequence[JsonObject],
) -> list[FaultVerdict]:
    """One ``summary.json`` ``faults`` entry per event of ``plan``.

    The only judge of fault windows: the summary calls it once at the end, and the
    dashboard calls it on the rows so far for its provisional verdicts.
    """
    measured = [r for r in rows if not r["warmup"]]
    return [
        _judge(plan, ev, obs, measured, samples)
        for ev, obs in zip(plan.events, observed, strict=True)
    ]


def after_span_s(start_s: float, end_s: float) -> float:
    """How long the before and after phases of a window last: its length, in 5..30 s."""
    return min(max(end_s - start_s, 5.0), 30.0)


def _judge(
    plan: FaultPlan,
    ev: FaultEvent,
    obs: Observed,
    rows: Sequence[RequestRow],
    samples: Sequence[JsonObject],
) -> FaultVerdict:
    start_s = float(obs.get("start_s", ev.at_s))
    end_s = float(obs.get("end_s", ev.end_s))
    start, end = start_s * 1000, end_s * 1000
    span = after_span_s(start_s, end_s) * 1000
    before = [r for r in rows if start - span <= r["sent_ms"] < start]
    during = [r for r in rows if start <= r["sent_ms"] < end]
    after_all = [r for r in rows if r["sent_ms"] >= end]
    after = [r for r in after_all if r["sent_ms"] < end + span]
    overlap_failed = [
        r for r in rows if r["outcome"] == "failed" and r["sent_ms"] < end and r["end_ms"] >= start
    ]
    before_stats = phase_stats(before)
    entry: FaultVerdict = {
        "name": ev.label,
        "kind": ev.kind,
        "start_s": round(start_s, 3),
        "end_s": round(end_s, 3),
        "started_in_window": len(during),
        "failed_overlapping": len(overlap_failed),
        "failed_by_class": dict(Counter(r["error_class"] or "client" for r in overlap_failed)),
        "before": before_stats,
        "during": phase_stats(r for r in during if not r.get("injected_cancel")),
        "after": phase_stats(after),
        "acceptance": {
            "before": _acceptance(samples, start_s - span / 1000, start_s),
            "during": _acceptance(samples, start_s, end_s),
            "after": _acceptance(samples, end_s, end_s + span / 1000),
        },
        "recovery_s": recovery_s(after_all, end, Baseline.of_rows(before), plan.recovery_tolerance),
        "verdict": "inconclusive",
        "reason": "",
    }
    _add_observed(entry, obs)
    if ev.kind == "cancel":
        c = _cancel_figures(during)
        entry["injected_cancels"] = c["injected_cancels"]
        entry["cancel_close_p50_ms"] = c["cancel_close_p50_ms"]
        entry["cancel_close_max_ms"] = c["cancel_close_max_ms"]
    if ev.kind == "restart":
        r = _restart_figures(rows, start)
        entry["caught_in_flight"] = r["caught_in_flight"]
        entry["caught_failed"] = r["caught_failed"]
        entry["time_to_first_token_s"] = r["time_to_first_token_s"]
    if ev.kind in PROXY_TOXICS:
        entry["fallbacks"] = _count_delta(samples, "fallbacks", start_s, end_s)
    entry["verdict"], entry["reason"] = _verdict(plan, ev, entry, obs)
    return entry


def _add_observed(e: FaultVerdict, obs: Observed) -> None:
    """What the rig saw goes into the entry as it is (TypedDicts do not merge)."""
    if "skipped" in obs:
        e["skipped"] = obs["skipped"]
    if "error" in obs:
        e["error"] = obs["error"]
    if "stopped_s" in obs:
        e["stopped_s"] = obs["stopped_s"]
    if "spawned_s" in obs:
        e["spawned_s"] = obs["spawned_s"]
    if "ready_s" in obs:
        e["ready_s"] = obs["ready_s"]
    if "time_to_ready_s" in obs:
        e["time_to_ready_s"] = obs["time_to_ready_s"]
    if "start_action" in obs:
        e["start_action"] = obs["start_action"]
    if "end_action" in obs:
        e["end_action"] = obs["end_action"]
    if "burst" in obs:
        e["burst"] = obs["burst"]
    if "settle" in obs:
        e["settle"] = obs["settle"]
    if "settled_s" in obs:
        e["settled_s"] = obs["settled_s"]
    if "running_excess" in obs:
        e["running_excess"] = obs["running_excess"]


def _cancel_figures(during: Sequence[RequestRow]) -> CancelFigures:
    cancelled = [r for r in during if r.get("injected_cancel")]
    close = [c for r in cancelled if (c := r.get("cancel_close_ms")) is not None]
    return {
        "injected_cancels": len(cancelled),
        "cancel_close_p50_ms": _pct(close, 50),
        "cancel_close_max_ms": round(max(close), 3) if close else None,
    }


def _restart_figures(rows: Sequence[RequestRow], start: float) -> RestartFigures:
    caught = [r for r in rows if r["sent_ms"] < start <= r["end_ms"]]
    firsts = [
        f
        for r in rows
        # Any request's first token counts, also one later cut off by the run's end: the
        # restarted engine answered then.
        if r["sent_ms"] >= start and (f := r["first_token_ms"]) is not None
    ]
    return {
        "caught_in_flight": len(caught),
        "caught_failed": sum(1 for r in caught if r["outcome"] == "failed"),
        "time_to_first_token_s": round((min(firsts) - start) / 1000, 4) if firsts else None,
    }


def _verdict(
    plan: FaultPlan, ev: FaultEvent, e: FaultVerdict, obs: Observed
) -> tuple[FaultVerdictWord, str]:
    if "not_reached" in obs:
        return "not_exercised", obs["not_reached"]
    if "skipped" in e:
        return "skipped", e["skipped"]
    if "error" in e:
        return "failed", f"the fault could not be applied: {e['error']}"
    failed = e["failed_overlapping"]
    if failed > ev.max_failures:
        classes = ", ".join(f"{n} {c}" for c, n in e["failed_by_class"].items())
        return "failed", f"{failed} requests failed around the window ({classes})"
    if ev.kind == "cancel" and not e.get("injected_cancels"):
        return "not_exercised", (
            f"no cancellation was injected ({e['started_in_window']} requests started "
            "in the window)"
        )
    if ev.kind == "cancel" and e.get("settled_s", 0) is None:
        return "failed", (
            f"the endpoint still held {e.get('running_excess')} more requests than the "
            f"client had open {ev.settle_s:g} s after the cancellations: cancelled streams "
            "kept slots"
        )
    if not e["started_in_window"] and ev.kind not in ("idle", "restart"):
        return "not_exercised", "nothing measured: no request started in the window"
    reasons = []
    b, d, a = e["before"], e["during"], e["after"]
    for name, bv, dv in (
        ("TTFT", b["ttft_p95_ms"], d["ttft_p95_ms"]),
        ("TPOT", b["tpot_p95_ms"], d["tpot_p95_ms"]),
    ):
        if bv is not None and dv is not None and bv > 0:
            ratio = dv / bv
            if ratio > plan.max_degradation:
                reasons.append(
                    f"{name} p95 grew {ratio:.1f}x in the window (bound {plan.max_degradation:g}x)"
                )
    comparable = b["ok"] >= MIN_REQUESTS and a["ok"] >= MIN_REQUESTS
    if comparable and e["recovery_s"] is None:
        reasons.append(
            "latency did not come back to the level before the window (within that "
            "phase's own spread) by the end of the run"
        )
    if reasons:
        return "degraded", "; ".join(reasons)
    if d["ok"] == 0 and ev.kind not in ("idle", "restart", "cancel"):
        # Requests started in the window but none completed (cut off, within the failures
        # allowed): its latency is unknown, so "within the bound" cannot be said.
        return "inconclusive", (
            f"none of the {e['started_in_window']} requests sent in the window completed: "
            "its latency is unknown"
        )
    if not comparable:
        phase, n = ("before", b["ok"]) if b["ok"] < MIN_REQUESTS else ("after", a["ok"])
        return "inconclusive", (
            f"too few requests completed {phase} the window to tell whether latency "
            f"came back ({n}, need {MIN_REQUESTS})"
        )
    what = "kept serving"
    fallbacks = e.get("fallbacks")
    if fallbacks:
        what = f"fell back to plain decoding ({fallbacks} fallbacks)"
    return "held", f"no failures; the endpoint {what} within the latency bound"


def _count_delta(samples: Sequence[JsonObject], field: str, a_s: float, b_s: float) -> int | None:
    """How much the counter ``field`` rose over the span (a count: an int)."""
    first, last = _between(samples, a_s, b_s, inner=False)
    if first is None or last is None or field not in first or field not in last:
        return None
    return round(float(last[field]) - float(first[field]))
