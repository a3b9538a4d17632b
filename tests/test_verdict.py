"""Fault verdicts on synthetic rows with known answers."""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

import numpy as np

from loadtest.features.faults.kinds.cancel import CancelFigures, CancelObserved, CancelSpec
from loadtest.features.faults.kinds.restart import RestartFigures, RestartObserved
from loadtest.features.faults.kinds.toxics import ToxicFigures
from loadtest.features.faults.own_figures import top_figures, top_observed
from loadtest.features.faults.plan import FaultEvent, FaultPlan
from loadtest.features.faults.verdict import judge_windows, recovery_s
from loadtest.model.verdict import STATE_OF, FaultVerdict, Observed, RequestRow, failing_windows
from tests.verdict_rows import request_row as _row
from tests.verdict_rows import request_rows as _rows


def _judge(rows: list[RequestRow], **plan: Any) -> FaultVerdict:
    ev = FaultEvent(kind="draft_down", at_s=10, duration_s=5)
    (entry,) = judge_windows(FaultPlan(events=(ev,), **plan), [{}], rows, [])
    return entry


def test_a_mild_slowdown_holds() -> None:
    e = _judge(_rows(10_000, 15_000, 2.0))
    assert e["verdict"] == "held"
    # The bound it held within is said (the reason named none).
    assert e["reason"].endswith(
        "within the latency bound (TTFT and TPOT p95 at most 3x their level before the window)"
    )
    assert e["during"]["ttft_p95_ms"] == 20.0
    assert e["before"]["ttft_p95_ms"] == 10.0
    assert e["recovery_s"] == 0.0


def test_a_held_window_names_only_the_bound_it_checked() -> None:
    """A held reason named "TTFT and TPOT p95 at most 3x" for a window with no latency
    measured inside it (an idle gap sends nothing): no bound was checked there."""
    gap = [r for r in _rows(0, 0, 1.0) if not 9_800 <= r["sent_ms"] < 15_000]
    ev = FaultEvent(kind="idle", at_s=10, duration_s=5)
    (e,) = judge_windows(FaultPlan(events=(ev,)), [{}], gap, [])
    assert e["verdict"] == "held", e
    assert e["during"]["ttft_p95_ms"] is None
    assert "bound" not in e["reason"].replace("to hold to a bound", "")
    assert e["reason"].endswith("(none measured inside it to hold to a bound)"), e["reason"]
    # One measured p95 of the two: the bound names that one.
    no_tpot = [cast(RequestRow, {**r, "tpot_ms": None}) for r in _rows(10_000, 15_000, 2.0)]
    assert _judge(no_tpot)["reason"].endswith("(TTFT p95 at most 3x its level before the window)")


def test_a_slowdown_past_the_bound_is_degraded() -> None:
    e = _judge(_rows(10_000, 15_000, 4.0))
    assert e["verdict"] == "degraded"
    assert "TTFT p95 grew 4.0x" in e["reason"]


def test_a_failure_in_the_window_fails_it() -> None:
    e = _judge(_rows(0, 0, 1.0, fail_at=12_000))
    assert e["verdict"] == "failed"
    assert e["failed_by_class"] == {"disconnected": 1}


def test_failures_within_the_allowance_do_not_fail_it() -> None:
    ev = FaultEvent(kind="restart", at_s=10, duration_s=5, max_failures=1)
    rows = _rows(0, 0, 1.0, fail_at=12_000)
    (e,) = judge_windows(FaultPlan(events=(ev,)), [{}], rows, [])
    assert e["verdict"] == "held"


def test_slow_recovery_is_measured() -> None:
    rows = _rows(10_000, 18_000, 2.0)  # stays slow 3 s after the window closes
    e = _judge(rows)
    assert e["recovery_s"] == 3.0
    assert recovery_s(rows, 15_000, e["before"], 0.1) == 3.0


def test_never_recovering_is_degraded() -> None:
    e = _judge(_rows(10_000, 31_000, 2.0))
    assert e["recovery_s"] is None
    assert e["verdict"] == "degraded"


def test_acceptance_comes_from_the_counters_inside_each_phase() -> None:
    samples = [
        {"t_s": float(t), "ok": True, "draft_tokens": d, "accepted_tokens": a}
        for t, d, a in [
            (4, 0, 0),
            (5, 100, 80),
            (10, 600, 480),
            (11, 600, 480),
            (15, 600, 480),
            (16, 700, 530),
            (20, 1100, 730),
        ]
    ]
    ev = FaultEvent(kind="draft_down", at_s=10, duration_s=5)
    (e,) = judge_windows(FaultPlan(events=(ev,)), [{}], _rows(0, 0, 1.0), samples)
    assert e["acceptance"] == {"before": 0.8, "during": None, "after": 0.5}


def test_a_scrape_answered_after_the_window_opened_does_not_hide_its_events() -> None:
    # The scrape sent at 9.99 s was answered at 10.05 s, after the fallback at 10.0 s:
    # it must not serve as the "before" reading, or the window would count 0 fallbacks.
    samples = [
        {"t_s": 9.0, "t_end_s": 9.01, "ok": True, "fallbacks": 0.0},
        {"t_s": 9.99, "t_end_s": 10.05, "ok": True, "fallbacks": 1.0},
        {"t_s": 12.0, "t_end_s": 12.01, "ok": True, "fallbacks": 1.0},
        {"t_s": 15.5, "t_end_s": 15.51, "ok": True, "fallbacks": 1.0},
    ]
    ev = FaultEvent(kind="draft_down", at_s=10, duration_s=5)
    (e,) = judge_windows(FaultPlan(events=(ev,)), [{}], _rows(0, 0, 1.0), samples)
    assert top_figures(e, ToxicFigures)["fallbacks"] == 1.0


def test_a_held_draft_outage_says_the_server_fell_back_by_its_counter() -> None:
    """The words of a held window come from the kind (``served_as``): the draft faults
    name the fallbacks the server counted in it, a kind without such figures none."""
    fell_back = [
        {"t_s": 9.0, "t_end_s": 9.01, "ok": True, "fallbacks": 0.0},
        {"t_s": 15.5, "t_end_s": 15.51, "ok": True, "fallbacks": 2.0},
    ]
    ev = FaultEvent(kind="draft_down", at_s=10, duration_s=5)
    (e,) = judge_windows(FaultPlan(events=(ev,)), [{}], _rows(0, 0, 1.0), fell_back)
    assert e["verdict"] == "held", e
    assert e["reason"].startswith(
        "no failures; the endpoint fell back to plain decoding (switched 2 times, by its "
        "fallbacks counter) within the latency bound"
    ), e["reason"]
    (e,) = judge_windows(FaultPlan(events=(ev,)), [{}], _rows(0, 0, 1.0), [])
    assert e["reason"].startswith("no failures; the endpoint kept serving within"), e["reason"]
    idle = FaultEvent(kind="idle", at_s=10, duration_s=5)
    (e,) = judge_windows(FaultPlan(events=(idle,)), [{}], _rows(0, 0, 1.0), fell_back)
    assert e["reason"].startswith("no failures; the endpoint kept serving"), e["reason"]


def _noisy_rows(seed: int, per_s: int = 6, seconds: int = 20) -> list[RequestRow]:
    """An unchanged deployment: every second a few requests, latencies spread wide."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(per_s * seconds):
        t = i * 1000.0 / per_s
        rows.append(_row(t, float(rng.lognormal(np.log(20), 0.5)), float(rng.lognormal(1.6, 0.4))))
    return rows


def test_an_unchanged_deployment_holds_every_time() -> None:
    # The window changes nothing: whether the verdict holds must not depend on the draw.
    # A fixed 10% of one median does (a 1 s slice of 6 requests moves more than that).
    ev = FaultEvent(kind="draft_down", at_s=8, duration_s=4)
    plan = FaultPlan(events=(ev,))
    words, fixed_rule_misses = Counter[str](), 0
    for seed in range(60):
        rows = _noisy_rows(seed)
        (e,) = judge_windows(plan, [{}], rows, [])
        words[e["verdict"]] += 1
        after = [r for r in rows if r["sent_ms"] >= 12_000]
        fixed_rule_misses += recovery_s(after, 12_000, e["before"], 0.1) is None
    # Seeded (numpy's default_rng), so this is the same 60 draws every run. The rate at
    # which other draws would degrade was measured: seeds 1000-3999 all held (q < 1e-3,
    # 95% upper bound), so a change of numpy's stream would still fail this at most ~6%
    # of the time; keep the seeds fixed rather than read this as a rate.
    assert words == {"held": 60}, words
    assert fixed_rule_misses > 0  # the old rule would have flipped on these very rows


def test_a_real_slowdown_that_stays_is_still_degraded_with_noise() -> None:
    rows = _noisy_rows(3)
    slow = [
        _row(r["sent_ms"], r["ttft_ms"] or 0, (r["tpot_ms"] or 0) * 2.5)
        if r["sent_ms"] >= 8000
        else r
        for r in rows
    ]
    ev = FaultEvent(kind="draft_down", at_s=8, duration_s=4)
    (e,) = judge_windows(FaultPlan(events=(ev,)), [{}], slow, [])
    assert e["verdict"] == "degraded"
    assert "did not come back" in e["reason"]


def test_too_few_requests_after_the_window_is_inconclusive() -> None:
    rows = [r for r in _rows(0, 0, 1.0) if r["sent_ms"] < 15_300]  # 3 requests after it
    e = _judge(rows)
    assert e["after"]["ok"] == 3
    assert e["verdict"] == "inconclusive"
    assert "too few requests completed after the window" in e["reason"]


def test_a_window_nothing_started_in_is_not_exercised() -> None:
    rows = [r for r in _rows(0, 0, 1.0) if not 10_000 <= r["sent_ms"] < 15_000]
    e = _judge(rows)
    assert e["started_in_window"] == 0
    assert e["verdict"] == "not_exercised"
    assert STATE_OF[e["verdict"]] == "not_exercised"


def test_a_cancel_window_that_cancelled_nothing_is_not_exercised() -> None:
    ev = FaultEvent(
        kind="cancel", at_s=10, duration_s=5, spec=CancelSpec(fraction=0.5, after_tokens=5)
    )
    obs: Observed = {}
    seen = top_observed(obs, CancelObserved)  # the kind's keys, as its inject writes them
    seen["settled_s"], seen["running_excess"] = 0.01, 0
    (e,) = judge_windows(FaultPlan(events=(ev,)), [obs], _rows(0, 0, 1.0), [])
    assert e["started_in_window"] == 50
    assert top_figures(e, CancelFigures)["injected_cancels"] == 0
    assert e["verdict"] == "not_exercised"
    assert "no cancellation was injected" in e["reason"]


def test_a_window_the_run_never_reached_is_not_exercised() -> None:
    ev = FaultEvent(kind="draft_down", at_s=40, duration_s=5)
    obs: Observed = {"not_reached": "not reached: the run ended at 30.0 s"}
    (e,) = judge_windows(FaultPlan(events=(ev,)), [obs], _rows(0, 0, 1.0), [])
    assert e["verdict"] == "not_exercised"
    assert e["reason"].startswith("not reached")


def test_fail_on_gates_on_the_negative_verdicts_only() -> None:
    held = _judge(_rows(10_000, 15_000, 2.0))
    degraded = _judge(_rows(10_000, 15_000, 4.0))
    failed = _judge(_rows(0, 0, 1.0, fail_at=12_000))
    nothing = _judge([r for r in _rows(0, 0, 1.0) if not 10_000 <= r["sent_ms"] < 15_000])
    assert [held["verdict"], degraded["verdict"], failed["verdict"]] == [
        "held",
        "degraded",
        "failed",
    ]
    windows = [held, degraded, failed, nothing]
    assert failing_windows(windows, "failed") == [failed]
    assert failing_windows(windows, "degraded") == [degraded, failed]
    assert failing_windows(windows, "never") == []
    assert failing_windows([held, nothing], "degraded") == []


def test_a_window_none_of_whose_requests_completed_is_inconclusive_not_held() -> None:
    # Every request sent in the window was cut off (cancelled, so within the failures
    # allowed): before and after look alike, but nothing says what latency was inside.
    rows = [
        _row(r["sent_ms"], outcome="cancelled", error_class="grace_expired")
        if 10_000 <= r["sent_ms"] < 15_000
        else r
        for r in _rows(0, 0, 1.0)
    ]
    e = _judge(rows)
    assert e["started_in_window"] == 50 and e["during"]["ok"] == 0
    assert e["verdict"] == "inconclusive"
    assert "none of the 50 requests sent in the window completed" in e["reason"]


def test_a_restarts_first_token_counts_a_request_later_cut_off() -> None:
    # The restarted engine answered at 13 s; the run's end then cut that request off.
    # Its first token is still the engine's first after the restart.
    ev = FaultEvent(kind="restart", at_s=2, duration_s=1)
    rows = [
        _row(0.0, outcome="failed", error_class="disconnected", first_token_ms=None),
        _row(8_000.0, ttft=5_000.0, outcome="cancelled", error_class="grace_expired"),
    ]
    obs: Observed = {}
    top_observed(obs, RestartObserved)["time_to_ready_s"] = 6.0
    (e,) = judge_windows(FaultPlan(events=(ev,)), [obs], rows, [])
    assert top_figures(e, RestartFigures)["time_to_first_token_s"] == 11.0


def _scrapes(drafted_at: dict[int, float]) -> list[dict[str, Any]]:
    """One scrape a second for 30 s; ``drafted_at[t]``: drafted tokens by then (42% kept)."""
    out, drafted = [], 0.0
    for t in range(30):
        drafted = drafted_at.get(t, drafted)
        out.append(
            {
                "t_s": t + 0.0005,
                "t_end_s": t + 0.01,
                "ok": True,
                "draft_tokens": drafted,
                "accepted_tokens": round(drafted * 0.42),
            }
        )
    return out


def test_the_step_verifying_at_the_edge_is_not_acceptance_during_an_outage() -> None:
    # Drafting stops at 10 s, but the step in flight then lands in the scrape at 11 s:
    # 64 drafted tokens inside the window, and nothing after. Read from the edge, that
    # one step was "acceptance 0.42 during the outage"; by chance of a scrape, "-".
    steady = {t: 2000.0 * t for t in range(11)}
    ev = FaultEvent(kind="draft_down", at_s=10, duration_s=5)
    rows = _rows(0, 0, 1.0)
    edge = _scrapes({**steady, 11: 20_064.0})
    (e,) = judge_windows(FaultPlan(events=(ev,)), [{}], rows, edge)
    assert e["acceptance"]["before"] == 0.42
    assert e["acceptance"]["during"] is None
    # A draft that kept drafting (a latency toxic) still shows its acceptance.
    slowed = _scrapes({t: 1000.0 * t for t in range(30)})
    (e,) = judge_windows(FaultPlan(events=(ev,)), [{}], rows, slowed)
    assert e["acceptance"]["during"] == 0.42
