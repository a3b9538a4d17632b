"""Replayed agent sessions, baseline against candidate: what a decode speedup could save
of session time, and what the candidate saved.

Both sides replayed the same recorded sessions (``agent-trace``): each session's
replays are averaged on each side, and the saving is the mean, over the sessions both
completed, of A's session time minus B's. The most any decode speedup (speculation)
could save is A's decode time; tools and the agent's recorded work are replayed as
waits and do not move.

Whether the saving is more than noise is judged on the model calls, paired: call ``k``
of session ``s`` is the same request on both sides (same prompt, same output length),
so a replay of it on A and one on B differ by the deployment and chance only, however
unlike the calls are; a call replayed in two runs a side makes two pairs. The statistic
is the model time saved, the pairs' differences summed as sessions sum them; a
sign-flip test (with no difference, A and B are exchangeable within a pair) gives its
p-value, a bootstrap over the pairs its interval. A saving that comes from a few long
calls is only as sure as those calls agree, which is the truth of it. Neither holds
what moved a whole run, so a saving is called only when p < ``ALPHA``, the interval
excludes zero *and* the saving reaches the comparison's practical threshold (its
``min_effect`` of A's session time: the one-run bar with a single run a side).
Otherwise it is within noise, which is not "nothing saved"; with fewer than
``MIN_SAMPLES`` pairs, or sessions on one side only, it cannot be told.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence

import numpy as np

from loadtest.measure.stats import ALPHA, MIN_SAMPLES, format_p
from loadtest.model.comparison import SavingsVerdict, SessionSavings, SessionSide
from loadtest.model.summary import AgentTraceBlock, AgentTraceSession

__all__ = ["RESAMPLES", "render_savings", "session_savings"]

RESAMPLES = 4000
"""Bootstrap resamples and sign flips (seeded: one comparison, one answer)."""


def _by_trace(blocks: Sequence[AgentTraceBlock]) -> dict[str, list[AgentTraceSession]]:
    out: dict[str, list[AgentTraceSession]] = {}
    for b in blocks:
        for row in b["sessions"]:
            out.setdefault(row["trace_id"], []).append(row)
    return out


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _parts(row: AgentTraceSession) -> tuple[float, float, float, float, float]:
    return (row["session_ms"], row["ttft_ms"], row["decode_ms"], row["tools_ms"], row["other_ms"])


def _side(
    blocks: Sequence[AgentTraceBlock], rows: dict[str, list[AgentTraceSession]], ids: list[str]
) -> SessionSide:
    # Each session's replays averaged, then the sessions: a session replayed more
    # often on one side weighs no more than the others.
    per = [[_mean(col) for col in zip(*(_parts(r) for r in rows[i]), strict=True)] for i in ids]
    means: list[float | None] = (
        [round(_mean(col), 3) for col in zip(*per, strict=True)] if ids else [None] * 5
    )
    return {
        "runs": len(blocks),
        "replays": sum(len(b["sessions"]) for b in blocks),
        "session_ms": means[0],
        "ttft_ms": means[1],
        "decode_ms": means[2],
        "tools_ms": means[3],
        "other_ms": means[4],
    }


def session_savings(
    a: Sequence[AgentTraceBlock | None],
    b: Sequence[AgentTraceBlock | None],
    calls_a: Mapping[str, Sequence[float]],
    calls_b: Mapping[str, Sequence[float]],
    min_effect: float,
) -> SessionSavings | None:
    """The savings of B's sessions against A's; None when neither side replayed any.

    ``calls_a``/``calls_b``: per call (``trace_id#call``), its model times in ms.
    """
    ba = [x for x in a if x is not None]
    bb = [x for x in b if x is not None]
    if not ba and not bb:
        return None
    ra, rb = _by_trace(ba), _by_trace(bb)
    ids = sorted(set(ra) & set(rb))
    side_a, side_b = _side(ba, ra, ids), _side(bb, rb, ids)
    keys = sorted(set(calls_a) & set(calls_b))
    pairs = [(x, y) for k in keys for x, y in zip(calls_a[k], calls_b[k], strict=False)]
    out: SessionSavings = {
        "paired": len(ids),
        "a": side_a,
        "b": side_b,
        "possible_ms": side_a["decode_ms"],
        "possible_share": None,
        "saved_ms": None,
        "saved_share": None,
        "saved_of_possible": None,
        "paired_calls": len(pairs),
        "model_saved_ms": None,
        "ci_low_ms": None,
        "ci_high_ms": None,
        "p_value": None,
        "threshold_ms": None,
        "verdict": "cannot tell",
        "reason": "",
    }
    if not ba or not bb:
        only = "A" if ba else "B"
        out["reason"] = f"only {only} replayed agent sessions: nothing to set them against"
        return out
    if not ids:
        out["reason"] = "the sides completed no session in common (different traces?)"
        return out
    session_a, decode_a = side_a["session_ms"] or 0.0, side_a["decode_ms"] or 0.0
    saved = _mean(
        [
            _mean([r["session_ms"] for r in ra[i]]) - _mean([r["session_ms"] for r in rb[i]])
            for i in ids
        ]
    )
    out["possible_share"] = round(decode_a / session_a, 4) if session_a > 0 else None
    out["saved_ms"] = round(saved, 3)
    out["saved_share"] = round(saved / session_a, 4) if session_a > 0 else None
    out["saved_of_possible"] = round(saved / decode_a, 4) if decode_a > 0 else None
    threshold = session_a * min_effect
    out["threshold_ms"] = round(threshold, 3)
    if len(pairs) < MIN_SAMPLES:
        out["reason"] = (
            f"{len(pairs)} pairs of calls answered on both sides, fewer than "
            f"{MIN_SAMPLES}: no test to trust"
        )
        return out
    diffs = np.asarray([x - y for x, y in pairs])
    # Per session: the mean pair times the calls a session has.
    scale = len(keys) / len({k.rsplit("#", 1)[0] for k in keys})
    low, high = _interval(diffs)
    out["model_saved_ms"] = round(float(diffs.mean()) * scale, 3)
    out["ci_low_ms"], out["ci_high_ms"] = round(low * scale, 3), round(high * scale, 3)
    p = _sign_flip(diffs)
    out["p_value"] = float(f"{p:.4g}")
    verdict: SavingsVerdict = "within noise"
    if p < ALPHA and low > 0 and saved >= threshold:
        verdict = "saved"
    elif p < ALPHA and high < 0 and -saved >= threshold:
        verdict = "added"
    out["verdict"] = verdict
    out["reason"] = {
        "saved": "p < 0.05, the interval excludes 0 and the saving reaches the threshold",
        "added": "B's sessions took longer: p < 0.05, the interval excludes 0 and the "
        "difference reaches the threshold",
    }.get(verdict) or _noise_reason(p, low, high, saved, threshold)
    return out


def _noise_reason(p: float, low: float, high: float, saved: float, threshold: float) -> str:
    """What kept a saving from being called, only what holds of the printed figures: a
    fixed "p >= 0.05, the interval holds 0 or ..." followed an interval of [4.7, 228.7]."""
    why = []
    if p >= ALPHA:
        why.append(f"p {format_p(p)} is not under 0.05")
    if low <= 0 <= high:
        why.append("the interval holds 0")
    if abs(saved) < threshold:
        why.append(f"the difference ({saved:.1f} ms a session) is under the threshold")
    elif not why:  # each test passed, but the session time moved against the model time
        why.append("the session time moved the other way from the model time")
    return "; ".join(why) + ": no saving shown, which is not none"


def _interval(diffs: np.ndarray) -> tuple[float, float]:
    """Percentile bootstrap interval of the pairs' mean, at 1 - ALPHA."""
    rng = np.random.default_rng(0)
    means = diffs[rng.integers(0, diffs.size, (RESAMPLES, diffs.size))].mean(axis=1)
    low, high = np.percentile(means, [100 * ALPHA / 2, 100 * (1 - ALPHA / 2)])
    return float(low), float(high)


def _sign_flip(diffs: np.ndarray) -> float:
    """Two-sided p-value of "no difference": random signs on each pair's difference."""
    rng = np.random.default_rng(1)
    signs = rng.choice((-1.0, 1.0), (RESAMPLES, diffs.size))
    sums = np.abs((signs * diffs).sum(axis=1))
    # The +1s: the observed sum is one of the arrangements; a p-value is never 0.
    return float((np.sum(sums >= abs(diffs.sum()) - 1e-9) + 1) / (RESAMPLES + 1))


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


def render_savings(s: SessionSavings, confounded: bool = False) -> list[str]:
    """The savings as text lines (80 columns): the split side by side, then the saving."""
    a, b = s["a"], s["b"]
    lines = [
        "",
        f"agent sessions (agent-trace): {s['paired']} replayed on both sides, per session (ms)",
        f"{'':<26}{'A':>12}{'B':>12}{'B-A':>12}",
    ]
    for label, va, vb in (
        ("session", a["session_ms"], b["session_ms"]),
        ("  model: TTFT", a["ttft_ms"], b["ttft_ms"]),
        ("  model: decode", a["decode_ms"], b["decode_ms"]),
        ("  tools", a["tools_ms"], b["tools_ms"]),
        ("  other (agent work, lag)", a["other_ms"], b["other_ms"]),
    ):
        diff = None if va is None or vb is None else vb - va
        lines.append(f"{label:<26}{_ms(va):>12}{_ms(vb):>12}{_ms(diff):>12}")
    if s["possible_share"] is not None:
        lines.append(
            f"decode holds {_pct(s['possible_share'])} of A's session time "
            f"({_ms(s['possible_ms'])} ms): the most a decode speedup could save"
        )
    verdict: str = s["verdict"]
    if confounded and verdict in ("saved", "added"):
        verdict += " (confounded)"
    if s["saved_ms"] is None or s["model_saved_ms"] is None:
        saved = "" if s["saved_ms"] is None else f" ({_ms(s['saved_ms'])} ms a session)"
        lines.append(f"saved{saved}: {verdict}: {s['reason']}")
        return lines
    lines.append(
        f"B saved {_ms(s['saved_ms'])} ms a session ({_pct(s['saved_share'])} of A's time, "
        f"{_pct(s['saved_of_possible'])} of the possible): {verdict}"
    )
    lines.append(
        f"  model time saved {_ms(s['model_saved_ms'])} ms, 95% CI [{_ms(s['ci_low_ms'])}, "
        f"{_ms(s['ci_high_ms'])}], p {format_p(s['p_value'])},"
    )
    lines.append(
        f"  over {s['paired_calls']} paired calls; a saving called from {_ms(s['threshold_ms'])} ms"
    )
    lines += textwrap.wrap(f"({s['reason']})", 80, initial_indent="  ", subsequent_indent="   ")
    model = (
        None if a["ttft_ms"] is None or a["decode_ms"] is None else a["ttft_ms"] + a["decode_ms"]
    )
    if model is not None and s["saved_ms"] > model:
        # Tools and the agent's work are replayed as recorded: only the model can move.
        lines.append("  more than A's whole model time: the sides differ in more than the model")
    return lines
