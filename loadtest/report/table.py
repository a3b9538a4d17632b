"""The compact table printed at the end of a run; plain text, no terminal control codes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from loadtest.model.summary import AgentBlock, StatKey, Summary
from loadtest.model.verdict import FaultVerdict, SloCheck
from loadtest.report.evidence import run_evidence

__all__ = [
    "LATENCY_ORDER",
    "fault_figures",
    "render_agent",
    "render_faults",
    "render_table",
    "slo_line",
]


def render_agent(agent: AgentBlock) -> str:
    """Task outcomes, steps, retries and where task time went, as text."""
    rate = agent["completion_rate"]
    lines = [
        f"agent tasks: {agent['tasks']} ended, {agent['completed']} completed"
        + (f" ({rate:.0%})" if rate is not None else "")
        + f", {agent['failed']} failed, {agent['step_limit']} hit the step limit, "
        f"{agent['cancelled']} cancelled"
        + ("  errors: " + ", ".join(f"{k} {v}" for k, v in agent["errors"].items()))
        * bool(agent["errors"]),
    ]
    steps, retries = agent["steps"], agent["retries"]
    if steps["count"]:
        lines.append(
            f"steps per task: mean {steps.get('mean', 0):.1f}  max {steps.get('max', 0):.0f}   "
            f"retries per task: mean {retries.get('mean', 0):.2f}  "
            f"max {retries.get('max', 0):.0f}"
        )
    validity, expected = agent["validity_rate"], agent["expected_match_rate"]
    if validity is not None:
        lines.append(f"valid calls: {validity:.1%} of responses with calls")
    if expected is not None:
        lines.append(f"calls matching the expected function: {expected:.1%}")
    shares = agent["time_shares"]
    if shares:
        parts = "  ".join(
            f"{p} {v.get('p50', 0):.1%}/{v.get('p95', 0):.1%}" for p, v in shares.items()
        )
        lines.append(f"share of task time (p50/p95): {parts}")
    return "\n".join(lines)


FigureKey = Literal[
    "injected_cancels",
    "cancel_close_p50_ms",
    "settled_s",
    "time_to_ready_s",
    "time_to_first_token_s",
    "caught_in_flight",
    "fallbacks",
    "recovery_s",
]

_ROWS = (
    ("TTFT", "ttft_ms"),
    ("TTFT (corrected)", "ttft_ms_corrected"),
    ("inter-chunk gap", "itl_ms"),
    ("time per output token", "tpot_ms"),
    ("end-to-end", "e2e_ms"),
    ("end-to-end (corrected)", "e2e_ms_corrected"),
    ("time to valid tool call", "tool_call_ms"),
    ("agent: time to valid call", "valid_call_ms"),
    ("agent: task time", "task_ms"),
    ("dispatch lag", "dispatch_lag_ms"),
    ("client lag (reading)", "client_lag_ms"),
)
LATENCY_ORDER = tuple(key for _, key in _ROWS)
"""The latency metrics in the order a reader asks about them: the first token, the gaps
between tokens, the whole answer, tool calls, then the driver's own lags (the printed
table and the HTML report both)."""
_COLS: tuple[StatKey, ...] = ("count", "p50", "p90", "p99", "p999", "max")


def render_table(summary: Summary) -> str:
    """Requests, throughput and the latency percentiles of a summary, as text."""
    r = summary["requests"]
    t = summary["throughput"]
    run = summary["run"]
    lines = [
        f"INTERRUPTED: stopped before its end; the figures cover the {run['measured_s']:.1f} s "
        "measured until then"
    ] * (run["interrupted"] and "rebuilt" not in summary)  # a rebuilt one says more
    lines += run_evidence(summary).lines
    lines += [
        f"run {run['id']}  scenario {run['scenario']}  model {run['model']}  "
        f"endpoint {run['endpoint']}",
        f"requests: sent {r['sent']}  ok {r['ok']}  failed {r['failed']}  "
        f"cancelled {r['cancelled']}  (warm-up {r['warmup']})"
        + (
            f"  resent on a stale connection {r['resent_stale_connection']}"
            if r.get("resent_stale_connection")
            else ""
        )
        + (
            "  errors: " + ", ".join(f"{k} {v}" for k, v in r["errors"].items())
            if r["errors"]
            else ""
        ),
        f"throughput: {t['requests_per_s']:.2f} req/s  {t['output_tokens_per_s']:.1f} "
        f"output tokens/s over {run['measured_s']:.1f} s",
    ]
    tpc = summary["tokens_per_chunk"]
    if tpc["count"]:
        lines.append(
            f"tokens per chunk: mean {tpc.get('mean', 0):.2f}  p50 {tpc.get('p50', 0):.2f}"
        )
    tc = summary["tool_calls"]
    if tc["responses_with_calls"]:
        lines.append(
            f"tool calls: {tc['valid']}/{tc['responses_with_calls']} valid, "
            f"{tc['correct']}/{tc['judged']} match the expected answer"
        )
    head = f"{'latency (ms)':<26}" + "".join(f"{c:>10}" for c in _COLS)
    lines += ["", head, "-" * len(head)]
    metrics = summary["metrics"]
    for label, key in _ROWS:
        stats = metrics.get(key)
        if not stats or not stats["count"]:
            continue
        cells = "".join(
            f"{stats.get(c):>10}" if c == "count" else f"{stats.get(c, 0.0):>10.2f}" for c in _COLS
        )
        lines.append(f"{label:<26}{cells}")
    driver = summary.get("driver")
    advice = driver["advice"] if driver else None
    if advice:
        lines.append(f"warning: {advice}")
    slo = summary["slo"]
    for check in slo["checks"]:
        lines.append(slo_line(check, r["ok"]))
    good = slo.get("goodput")
    if good:
        lines.append(
            f"goodput: {good['requests']} requests within every limit, "
            f"{good['per_s']:.2f}/s ({good['share']:.0%} of ok)"
        )
    return "\n".join(lines)


def slo_line(check: SloCheck, ok: int | None = None) -> str:
    """``SLO ttft_ms.p95 <= 500: 412.3 met``; a check with no value says so rather than
    printing ``None``: ``no data (0 requests ok), not exercised``."""
    head = f"SLO {check['slo']} <= {check['limit']:g}: "
    value = check["value"]
    if value is None or check.get("verdict") == "not_exercised":
        count = "" if ok is None else f" ({ok} requests ok)"
        return f"{head}no data{count}, not exercised"
    return f"{head}{value:g} {'met' if check['met'] else 'MISSED'}"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


_FIGURES: tuple[FigureKey, ...] = (
    "injected_cancels",
    "cancel_close_p50_ms",
    "settled_s",
    "time_to_ready_s",
    "time_to_first_token_s",
    "caught_in_flight",
    "fallbacks",
    "recovery_s",
)


def fault_figures(f: FaultVerdict) -> list[str]:
    """``name value`` of each figure a window has: counts as ints, times as they are."""
    out = []
    for k in _FIGURES:
        v = f.get(k)
        if v is not None:
            out.append(f"{k} {v}")
    return out


def render_faults(faults: Sequence[FaultVerdict]) -> str:
    """One block per fault window: verdict, reason and before/during/after latency."""
    lines = ["", "faults"]
    for f in faults:
        lines.append(
            f"  {f['name']:<24} {f['start_s']:>6.1f}-{f['end_s']:<6.1f}s  "
            f"{f['verdict'].upper():<9} {f['reason']}"
        )
        b, d, a = f["before"], f["during"], f["after"]
        lines.append(
            f"    TTFT p95 ms before/during/after {_ms(b['ttft_p95_ms'])} / "
            f"{_ms(d['ttft_p95_ms'])} / {_ms(a['ttft_p95_ms'])}   TPOT p95 "
            f"{_ms(b['tpot_p95_ms'])} / {_ms(d['tpot_p95_ms'])} / {_ms(a['tpot_p95_ms'])}"
        )
        acc = f["acceptance"]
        rates = (acc["before"], acc["during"], acc["after"])
        if any(v is not None for v in rates):
            cells = " / ".join("-" if v is None else f"{v:.2f}" for v in rates)
            lines.append(f"    draft acceptance before/during/after {cells}")
        extra = fault_figures(f)
        if extra:
            lines.append("    " + "  ".join(extra))
    return "\n".join(lines)
