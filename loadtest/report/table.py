"""The compact table printed at the end of a run; plain text, no terminal control codes.

Every line fits ``WIDTH`` columns, so that an 80x24 terminal shows each row once: the
latency rows are laid out to fit, and a line of prose longer than that (a warning, a
fault window's reason, a long endpoint) is wrapped at its spaces.
"""

from __future__ import annotations

import textwrap

from loadtest.engine.block_text import WIDTH, fit, packed
from loadtest.features.server_summary import served_by_simulator
from loadtest.model.summary import MetricStats, StatKey, Summary
from loadtest.model.verdict import SloCheck
from loadtest.report.error_examples import ErrorExamples, error_lines
from loadtest.report.evidence import run_evidence
from loadtest.report.exit_reasons import too_few
from loadtest.report.run_notes import corrected_counts_note
from loadtest.report.server_lines import server_lines

__all__ = [
    "ANSWER_METRICS",
    "LATENCY_LABELS",
    "LATENCY_ORDER",
    "render_table",
    "slo_line",
]

_ROWS = (
    ("TTFT", "ttft_ms"),
    ("TTFT (corrected)", "ttft_ms_corrected"),
    ("time to first answer", "ttfa_ms"),
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
LATENCY_LABELS = {key: label for label, key in _ROWS}
"""How the table names each latency metric (the busy warning names them so too)."""
"""The latency metrics in the order a reader asks about them: the first token, the gaps
between tokens, the whole answer, tool calls, then the driver's own lags (the printed
table and the HTML report both)."""
ANSWER_METRICS = ("ttfa_ms", "ttfa_ms_corrected")  # TTFT's values where nothing reasoned
_COLS: tuple[StatKey, ...] = ("count", "p50", "p90", "p99", "p999", "max")
_LABEL, _CELL = 25, 9
"""Column widths: the longest row label, and a cell (25 + 6 x 9 = 79 columns)."""


def _cell(v: float) -> str:
    # Two decimals up to 99,999.99 ms (the column keeps its decimal points in line); past
    # that fewer, so that 9 columns hold up to 99,999,999 ms.
    decimals = 2 if v < 100_000 else 1 if v < 1_000_000 else 0
    return f"{v:>{_CELL}.{decimals}f}"


def render_table(summary: Summary, errors: ErrorExamples | None = None) -> str:
    """Requests, throughput and the latency percentiles of a summary, as text; with
    ``errors`` (``common_errors`` of its folder), each failure class's common message."""
    r = summary["requests"]
    t = summary["throughput"]
    run = summary["run"]
    lines = [
        f"INTERRUPTED: stopped before its end; the figures cover the {run['measured_s']:.1f} s "
        "measured until then"
    ] * (run["interrupted"] and "rebuilt" not in summary)  # a rebuilt one says more
    lines += run_evidence(summary).lines
    lines += packed(
        [
            f"run {run['id']}",
            f"scenario {run['scenario']}",
            f"model {run['model']}",
            f"endpoint {run['endpoint']}",
        ]
    )
    counts = [
        f"requests: sent {r['sent']}",
        f"ok {r['ok']}",
        f"failed {r['failed']}",
        f"cancelled {r['cancelled']}",
        f"(warm-up {r['warmup']})",
    ]
    if r.get("resent_stale_connection"):
        counts.append(f"resent on a stale connection {r['resent_stale_connection']}")
    if r["errors"]:
        counts.append("errors: " + ", ".join(f"{k} {v}" for k, v in r["errors"].items()))
    lines += packed(counts)
    lines += error_lines(r["errors"], errors or {})
    lines.append(
        f"throughput: {t['requests_per_s']:.2f} req/s  {t['output_tokens_per_s']:.1f} "
        f"output tokens/s over {run['measured_s']:.1f} s"
    )
    lines += _chunk_lines(summary["tokens_per_chunk"])
    lines += _reasoning_lines(summary)
    lines += _tool_call_lines(summary)
    head = f"{'latency (ms)':<{_LABEL}}" + "".join(f"{c:>{_CELL}}" for c in _COLS)
    lines += ["", head, "-" * len(head)]
    metrics = summary["metrics"]
    printed = set()
    for label, key in _ROWS:
        stats = metrics.get(key)
        if not stats or not stats["count"]:
            continue
        if key in ANSWER_METRICS and "reasoning" not in summary:
            continue
        printed.add(key)
        cells = f"{stats['count']:>{_CELL}}" + "".join(_cell(stats.get(c, 0.0)) for c in _COLS[1:])
        lines.append(f"{label:<{_LABEL}}{cells}")
    note = corrected_counts_note(metrics, shown=printed)
    if note:
        lines += textwrap.wrap(note, WIDTH)
    lines += server_lines(summary)
    server = summary.get("server")
    if server is not None and "note" in server:
        # A login page or bytes at /metrics: in summary.json alone, the block looked empty.
        none = "none scraped: " * (server["scraped"] == 0)
        lines.append(f"server metrics: {none}{server['note']}")
    driver = summary.get("driver")
    advice = driver["advice"] if driver else None
    if advice:
        lines.append(f"warning: {advice}")
    slo = summary["slo"]
    for check in slo["checks"]:
        lines.append(slo_line(check, r.get("measured_ok", r["ok"]), r["warmup"]))
    good = slo.get("goodput")
    if good:
        lines.append(
            f"goodput: {good['requests']} requests within every limit, "
            f"{good['per_s']:.2f}/s ({good['share']:.0%} of the measured ok)"
        )
    return fit(lines)


def _chunk_lines(tpc: MetricStats) -> list[str]:
    """Tokens per chunk, and why where it is under 1.

    Only chunks that carried output (text, reasoning, a tool call) are counted; under 1,
    some of them carried no token of the server's own count: the simulator's tool-call
    chunk that names the function, which its usage leaves out.
    """
    if not tpc["count"]:
        return []
    mean = tpc.get("mean", 0.0)
    line = f"tokens per chunk: mean {mean:.2f}  p50 {tpc.get('p50', 0.0):.2f}"
    if round(mean, 2) < 1:
        why = "(under 1: some chunks held no token of the server's count, e.g. a tool name)"
        return packed([line, why])
    return [line]


def _reasoning_lines(summary: Summary) -> list[str]:
    """How many answers came after reasoning, how it was told apart, and its size."""
    block = summary.get("reasoning")
    if block is None:
        return []
    ways = ", ".join(f"{way} {n}" for way, n in block["splits"].items() if n)
    tokens, held = block["tokens_per_request"], block["reasoning_ms"]
    parts = [
        f"reasoning: {block['with_reasoning']}/{block['requests']} answers ({ways})",
        f"tokens p50 {tokens.get('p50', 0):.0f}",
        f"reasoning ms p50 {held.get('p50', 0):.1f} p99 {held.get('p99', 0):.1f}",
    ]
    if block["tokens_disagree"]:
        parts.append(f"usage's reasoning_tokens impossible in {block['tokens_disagree']}")
    return packed(parts, "  ")


def _tool_call_lines(summary: Summary) -> list[str]:
    """Valid calls, and the share matching the expected answers where it means something.

    Without expected answers (prompts that are not BFCL's) there is no share; against the
    built-in simulator, which calls a tool at random with made-up arguments, a match is
    chance, so the share is left out rather than read as the endpoint's failure.
    """
    tc = summary["tool_calls"]
    if not tc["responses_with_calls"]:
        return []
    head = f"tool calls: {tc['valid']}/{tc['responses_with_calls']} valid"
    # RequestRecord.tpot_ns: a server's tool parser holds tokens back until a call parses.
    why = "  (answers with calls have no TPOT nor tokens per step: a parser's bursts)"
    if not tc["judged"]:
        return [head, why]
    if served_by_simulator(summary):
        return [f"{head} (no answer match: the simulator calls tools at random)", why]
    return [f"{head}, {tc['correct']}/{tc['judged']} match the expected answer", why]


def slo_line(check: SloCheck, ok: int | None = None, warmup: int = 0) -> str:
    """``SLO ttft_ms.p95 <= 500: 412.3 met``; a check with no value says so rather than
    printing ``None``: ``no data (0 measured requests ok), not exercised``.

    ``ok`` counts the measured requests, the ones a latency is taken from: a killed run
    said ``no data (26 requests ok)`` of 26 warm-up requests; ``warmup`` says those."""
    head = f"SLO {check['slo']} <= {check['limit']:g}: "
    value = check["value"]
    if value is None or check.get("verdict") == "not_exercised":
        besides = f"; {warmup} warm-up, not measured" if warmup else ""
        count = "" if ok is None else f" ({ok} measured requests ok{besides})"
        return f"{head}no data{count}, not exercised"
    if check.get("verdict") == "inconclusive":
        return f"{head}{value:g} CANNOT TELL ({too_few(check, warmup)})"
    return f"{head}{value:g} {'met' if check['met'] else 'MISSED'}"
