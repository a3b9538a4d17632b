"""The compact table printed at the end of a run; plain text, no terminal control codes.

Every line fits ``WIDTH`` columns, so that an 80x24 terminal shows each row once: the
latency rows are laid out to fit, and a line of prose longer than that (a warning, a
fault window's reason, a long endpoint) is wrapped at its spaces.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterable, Sequence
from typing import Literal

from loadtest.model.summary import AgentBlock, MetricStats, StatKey, Summary
from loadtest.model.verdict import STATE_OF, FaultVerdict, SloCheck
from loadtest.report.error_examples import ErrorExamples, error_lines
from loadtest.report.evidence import run_evidence
from loadtest.report.exit_reasons import too_few
from loadtest.report.run_notes import corrected_counts_note, served_by_simulator
from loadtest.report.server_lines import server_lines

__all__ = [
    "ANSWER_METRICS",
    "LATENCY_LABELS",
    "LATENCY_ORDER",
    "WIDTH",
    "fault_figures",
    "fit",
    "packed",
    "render_agent",
    "render_faults",
    "render_table",
    "slo_line",
]

WIDTH = 80
"""Columns of the narrowest terminal the table is laid out for."""


def packed(parts: Sequence[str], sep: str = "  ", width: int = WIDTH) -> list[str]:
    """``parts`` joined by ``sep``, as many to a line as fit; the next lines indented two
    more than the first.

    For a line of ``name value`` groups: a group is never split across two lines.
    """
    if not parts:
        return []
    lines = [parts[0]]
    indent = " " * (len(parts[0]) - len(parts[0].lstrip(" ")) + 2)
    for part in parts[1:]:
        if len(lines[-1]) + len(sep) + len(part) <= width:
            lines[-1] += sep + part
        else:
            lines[-1] += sep.rstrip()
            lines.append(indent + part)
    return lines


def fit(lines: Iterable[str], width: int = WIDTH) -> str:
    """``lines`` joined, each one longer than ``width`` wrapped at its spaces.

    A wrapped line goes on indented two more than its own indent, so it reads as one.
    """
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")))
        out += textwrap.wrap(
            line.lstrip(" "),
            width,
            initial_indent=indent,
            subsequent_indent=indent + "  ",
            break_long_words=False,
            break_on_hyphens=False,
        )
    return "\n".join(out)


_SIMULATED = "not shown, the simulator calls at random"
"""In place of a share of tool calls matching the expected ones, against the simulator."""


def render_agent(agent: AgentBlock, *, simulated: bool = False) -> str:
    """Task outcomes, steps, retries and where task time went, as text.

    ``simulated``: the built-in simulator served the run; it calls tools at random, so a
    share of calls matching the expected ones is chance and is not shown.
    """
    rate = agent["completion_rate"]
    done = f"{agent['completed']} completed" + (f" ({rate:.0%})" if rate is not None else "")
    outcomes = [
        f"agent tasks: {agent['tasks']} ended",
        done,
        f"{agent['failed']} failed",
        f"{agent['step_limit']} hit the step limit",
        f"{agent['cancelled']} cancelled",
    ]
    lines = packed(outcomes, ", ")
    if agent["errors"]:
        lines.append("  errors: " + ", ".join(f"{k} {v}" for k, v in agent["errors"].items()))
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
        lines.append(
            f"calls matching the expected function: {_SIMULATED}"
            if simulated
            else f"calls matching the expected function: {expected:.1%}"
        )
    shares = agent["time_shares"]
    if shares:
        lines += packed(
            ["share of task time (p50/p95):"]
            + [
                f"{p} {v.get('p50', 0):.1%}/{v.get('p95', 0):.1%}"
                for p, v in shares.items()
                if p != "reasoning" or v.get("p95", 0) > 0  # a model that never reasoned
            ]
        )
    return fit(lines)


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
    for label, key in _ROWS:
        stats = metrics.get(key)
        if not stats or not stats["count"]:
            continue
        if key in ANSWER_METRICS and "reasoning" not in summary:
            continue

        cells = f"{stats['count']:>{_CELL}}" + "".join(_cell(stats.get(c, 0.0)) for c in _COLS[1:])
        lines.append(f"{label:<{_LABEL}}{cells}")
    note = corrected_counts_note(metrics)
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
    """``name value`` of each figure a window has: counts as ints, times as they are;
    then a plugin kind's own numbers (its ``detail``), in the order it wrote them."""
    out = []
    for k in _FIGURES:
        v = f.get(k)
        if v is not None:
            out.append(f"{k} {v}")
    for name, value in f.get("detail", {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out.append(f"{name} {value}")
    return out


def render_faults(faults: Sequence[FaultVerdict]) -> str:
    """One block per fault window: verdict, reason and before/during/after latency."""
    lines = ["", "faults"]
    for f in faults:
        # The reason on a line of its own: beside the name and times it wrapped every row.
        span = f"{f['start_s']:.1f}-{f['end_s']:.1f} s"
        lines.append(f"  {f['name']:<32} {span:>14}  {f['verdict'].upper()}")
        lines.append(f"    {f['reason']}")
        if STATE_OF[f["verdict"]] == "not_exercised":
            continue  # nothing tried: figures that fell in by chance read as evidence
        b, d, a = f["before"], f["during"], f["after"]
        ttft = f"{_ms(b['ttft_p95_ms'])} / {_ms(d['ttft_p95_ms'])} / {_ms(a['ttft_p95_ms'])}"
        tpot = f"{_ms(b['tpot_p95_ms'])} / {_ms(d['tpot_p95_ms'])} / {_ms(a['tpot_p95_ms'])}"
        both = f"    p95 ms before/during/after: TTFT {ttft}   TPOT {tpot}"
        if len(both) <= WIDTH:
            lines.append(both)
        else:
            lines += [
                f"    TTFT p95 ms before/during/after {ttft}",
                f"    TPOT p95 ms before/during/after {tpot}",
            ]
        acc = f["acceptance"]
        rates = (acc["before"], acc["during"], acc["after"])
        if any(v is not None for v in rates):
            cells = " / ".join("-" if v is None else f"{v:.2f}" for v in rates)
            lines.append(f"    draft acceptance before/during/after {cells}")
        extra = fault_figures(f)
        if extra:
            lines += packed([f"    {extra[0]}", *extra[1:]])
    return fit(lines)
