"""Verdicts on fault windows, from the per-request rows and the scraped server metrics.

Pure functions: the rows are ``requests.jsonl`` lines (times in ms from the run's
start), the samples ``metrics.jsonl`` lines, and what the rig observed. For each window
the requests are split by send time into *before* (the same length before the window,
5 to 30 s), *during* and *after*, and judged:

- ``failed``: more failed requests overlapped the window than it allows
  (``max_failures``), or its kind's own rule says so (cancelled streams kept their
  server slots);
- ``not_exercised``: the run ended before the window, the window injected nothing (its
  kind's rule: a cancel window that cancelled no request) or no request started in it;
- ``degraded``: no failures, but p95 TTFT or TPOT during the window grew past
  ``max_degradation`` times the level before, or latency had not come back to the
  level before (within that phase's own spread: see ``recovery``) by the end;
- ``inconclusive``: too few completed requests before or after the window to compare;
- ``held``: none of these.

Each kind (``kind.FaultKind``) adds its own figures to its entry and may rule on its
window before the shared rules (``judge``); which shared rules apply to it it declares
(``needs_requests``, ``needs_completed``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import cast

from loadtest.features.faults.entry import observed_keys, served_as
from loadtest.features.faults.figures import acceptance_between, pct
from loadtest.features.faults.kind import FaultKind, Ruling, Window, fault_kind
from loadtest.features.faults.plan import FaultEvent, FaultPlan
from loadtest.features.faults.recovery import MIN_REQUESTS, Baseline, recovery_s
from loadtest.model.json import JsonObject
from loadtest.model.verdict import FaultVerdict, Observed, PhaseStats, RequestRow

__all__ = ["after_span_s", "judge_windows", "phase_stats", "recovery_s"]


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
        "ttft_p50_ms": pct(ttft, 50),
        "ttft_p95_ms": pct(ttft, 95),
        "tpot_p50_ms": pct(tpot, 50),
        "tpot_p95_ms": pct(tpot, 95),
    }


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
    settle = plan.scrape_interval_s
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
        # A span that opens at an edge skips its first scrape interval: the step that
        # was verifying when the fault went on (or off) lands in the counters after the
        # edge, and one step's drafts (27 of 64 accepted) read as "acceptance during
        # the outage" in one run and as none in the next, by where a scrape fell.
        "acceptance": {
            "before": acceptance_between(samples, start_s - span / 1000, start_s),
            "during": acceptance_between(samples, start_s + settle, end_s),
            "after": acceptance_between(samples, end_s + settle, end_s + span / 1000),
        },
        "recovery_s": recovery_s(after_all, end, Baseline.of_rows(before), plan.recovery_tolerance),
        "verdict": "inconclusive",
        "reason": "",
    }
    _add_observed(entry, obs)
    kind = fault_kind(ev.kind)
    kind.figures(ev, Window(start_s, end_s, rows, during, samples), entry)
    entry["verdict"], entry["reason"] = _verdict(plan, ev, kind, entry, obs)
    return entry


def _add_observed(e: FaultVerdict, obs: Observed) -> None:
    """What the rig saw goes into the entry as it is (``entry.observed_keys``)."""
    seen = observed_keys()
    cast(dict[str, object], e).update((k, v) for k, v in obs.items() if k in seen)


def _verdict(
    plan: FaultPlan, ev: FaultEvent, kind: FaultKind, e: FaultVerdict, obs: Observed
) -> Ruling:
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
    own = kind.judge(ev, e)
    if own is not None:
        return own
    if not e["started_in_window"] and kind.needs_requests:
        return "not_exercised", "nothing measured: no request started in the window"
    reasons = []
    compared = []  # the p95s the bound was checked on: a held reason names only these
    b, d, a = e["before"], e["during"], e["after"]
    for name, bv, dv in (
        ("TTFT", b["ttft_p95_ms"], d["ttft_p95_ms"]),
        ("TPOT", b["tpot_p95_ms"], d["tpot_p95_ms"]),
    ):
        if bv is not None and dv is not None and bv > 0:
            compared.append(name)
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
    if d["ok"] == 0 and kind.needs_completed:
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
    what = served_as(kind, e)
    # The bound is said where it is claimed ("within the latency bound" named none), and
    # only on what was compared: a window with no latency measured in it held nothing.
    if not compared:
        return "held", (
            f"no failures; the endpoint {what}, and latency after the window came back to "
            "its level before (none measured inside it to hold to a bound)"
        )
    its = "its level" if len(compared) == 1 else "their level"
    bound = (
        f"{' and '.join(compared)} p95 at most {plan.max_degradation:g}x {its} before the window"
    )
    return "held", f"no failures; the endpoint {what} within the latency bound ({bound})"
