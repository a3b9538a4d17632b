"""A comparison as text: findings, side figures, costs, acceptance, latency lines, outputs.

The order is the order of trust: what the comparison could not judge comes first, then
what each side is and costs, then the latency lines each with its own verdict, then
whether the candidate answers as the baseline does.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import TypedDict

from loadtest.measure.stats import MIN_EFFECT, format_p
from loadtest.model.comparison import (
    AcceptanceLine,
    Comparison,
    DeploymentSide,
    Equivalence,
)
from loadtest.report.acceptance import TOLERANCE
from loadtest.report.acceptance_time import positions_said
from loadtest.report.compare_figures import SIDE_FIELDS
from loadtest.report.compare_parts import render_parts
from loadtest.report.compare_sessions import render_savings

__all__ = [
    "acceptance_rows",
    "cost_rows",
    "decision_line",
    "line_verdict",
    "render_comparison",
]


def _fmt(v: object) -> str:
    if v is None:
        return "-"
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


class Verdict(TypedDict):
    """What ``line_verdict`` reads of a line (a ``LineJson`` has it)."""

    verdict: str


def line_verdict(c: Comparison, d: Verdict) -> str:
    """A line's verdict as printed: a confounded comparison says so beside it."""
    v = d["verdict"]
    return f"{v} (confounded)" if c["confounded"] and v in ("faster", "slower") else v


def _field(side: Mapping[str, object], key: str) -> object:
    return side.get(key)


def cost_rows(c: Comparison) -> list[tuple[str, str, str]]:
    """(figure, A, B) rows of the sides' deployment costs; empty when neither has any."""
    da, db = c["a"].get("deployment_cost"), c["b"].get("deployment_cost")
    if da is None or db is None or (da["note"] and db["note"]):
        return []

    def row(label: str, key: str, unit: str = "", unknown: str = "-") -> tuple[str, str, str]:
        def one(d: DeploymentSide) -> str:
            if d["note"]:
                return "not measured"
            v = _field(d, key)
            return unknown if v is None else f"{_fmt(v)}{unit}"

        return (label, one(da), one(db))

    rows = [
        ("deployment", da["deployment"] or "URL", db["deployment"] or "URL"),
        row("cold start: to ready", "ready_s", " s"),
        row("cold start: to 1st token", "first_token_s", " s"),
        row("RSS steady (median)", "rss_steady_mib", " MiB"),
        row("RSS peak", "rss_peak_mib", " MiB"),
        # Unknown energy is "not available" (the reason follows the table), never a 0.
        row("energy per output token", "energy_j_per_output_token", " J", "not available"),
    ]

    added = c.get("memory_added")
    if added is not None:
        rows.append(("memory B adds over A", "", f"{added:+.1%} of A's steady RSS"))
    return rows


def _cost_lines(c: Comparison) -> list[str]:
    rows = cost_rows(c)
    if not rows:
        return []
    lines = ["", f"{'deployment cost':<26}{'A':>18}{'B':>18}"]
    lines += [f"{label:<26}{a:>18}{b:>18}" for label, a, b in rows]
    for name, side in (("A", c["a"]), ("B", c["b"])):
        d = side.get("deployment_cost")
        if d is not None:
            lines.append(f"energy {name}: {d['energy']}")
    return lines


def acceptance_rows(c: Comparison) -> list[tuple[str, str, str, str, str, str, str]]:
    """(side, category, engine rate, engine accepted/step, loadtest accepted/step,
    tolerance, agree) per category of each side that drafted."""
    rows = []
    for name, side in (("A", c["a"]), ("B", c["b"])):
        acc: list[AcceptanceLine] = side.get("acceptance") or []
        for a in acc:
            rows.append(
                (
                    name,
                    a["category"],
                    _num(a["engine_rate"]),
                    _num(a["engine_accepted_per_step"]),
                    _num(a["derived_accepted_per_step"]),
                    f"{a['tolerance']:.0%}",
                    {True: "yes", False: "NO", None: "-"}[a["agree"]],
                )
            )
    return rows


def _acceptance_lines(c: Comparison) -> list[str]:
    rows = acceptance_rows(c)
    if not rows:
        return []
    lines = [
        "",
        "acceptance (engine: accepted/drafted, and accepted per step = accepted / "
        "(output - accepted);",
        "  loadtest: tokens per step - 1, from bursts on the stream; agree: tokens "
        f"per step within {TOLERANCE:.0%})",
        f"{'side':<5}{'category':<16}{'engine rate':>12}{'engine/step':>12}"
        f"{'loadtest/step':>14}  agree",
    ]
    for name, cat, rate, eng, der, _, agree in rows:
        lines.append(f"{name:<5}{cat[:15]:<16}{rate:>12}{eng:>12}{der:>14}  {agree}")
    return lines


def _over_time_lines(c: Comparison) -> list[str]:
    """Per side that sped up: acceptance by draft position, and any collapse in a run."""
    lines: list[str] = []
    for name, side in (("A", c["a"]), ("B", c["b"])):
        a = side.get("acceptance_time")
        # No drafts seen: a side that does not speculate gets no line about them.
        if a is None or (a["tokens_per_step"] or 1.0) <= 1.0 or not a["per_position"]:
            continue
        lines += [""] * (not lines)
        lines.append(f"{name} by draft position: {positions_said(a)}")
        lines += [f"{name} COLLAPSE: {r['collapse']}" for r in a["runs"] if r["collapse"]]
    return lines


def _latency_lines(c: Comparison) -> list[str]:
    effect = c.get("min_effect", MIN_EFFECT)
    head = f"{'latency (ms)':<14}{'pct':>5}{'A':>10}{'B':>10}{'B-A':>10}  {'95% CI of B-A':<22}"
    lines = ["", head + f"{'p (Holm)':<11}verdict (|B-A| >= {effect:.0%} of A)"]
    for m, mc in c["metrics"].items():
        if mc["verdict"] == "not exercised":
            lines.append(f"{m:<14}  not exercised (n={mc['n_a']}/{mc['n_b']})")
            continue
        for i, (p, d) in enumerate(mc["percentiles"].items()):
            ci = f"[{_num(d['ci_low'])}, {_num(d['ci_high'])}]" + ("*" if d["significant"] else "")
            lines.append(
                f"{m if i == 0 else '':<14}{p:>5}{_num(d['a']):>10}{_num(d['b']):>10}"
                f"{_num(d['diff']):>10}  {ci:<22}{format_p(d.get('p_holm')):<11}"
                f"{line_verdict(c, d)}"
            )
        lines.append(f"{'':<14}rank test p {format_p(mc['p_value'])}, n={mc['n_a']}/{mc['n_b']}")
    lines.append("(* the interval excludes 0; p adjusted over all lines of the comparison)")
    lines += textwrap.wrap(
        f"(a line is called only with its interval off 0, its Holm p under 0.05 and |B-A| "
        f">= {effect:.0%} of A; the rank test compares whole distributions and calls nothing)",
        80,
    )
    return lines


def _equivalence_lines(eq: Equivalence) -> list[str]:
    lines = [
        f"\noutput equivalence: {eq['matching']}/{eq['prompts_compared']} prompts match "
        f"({eq['match_rate']:.1%}); {eq['attributed']} diverge only on B"
    ]
    for side, own in eq["own_divergence"].items():
        lines.append(
            f"  {side.upper()}'s own repeatability: {own['divergent']} of "
            f"{own['prompts_repeated']} repeated prompts answered differently"
            if own["prompts_repeated"]
            else f"  {side.upper()}'s own repeatability: not measured (no prompt answered "
            "twice; ab --repeat 2 sends every prompt twice per side)"
        )
    for d in eq["divergent"][:10]:
        whose = " (A diverges too)" if d["own_a"] else ""
        lines.append(f"  DIVERGES {d['prompt_id']}{whose}: A {d['a'][:60]!r} / B {d['b'][:60]!r}")
    return lines


def decision_line(c: Comparison) -> str:
    """The comparison in one line, before its evidence: which lines B is faster or
    slower on and by how much, or why none is called (``ab`` printed 45 lines and no
    decision; "no detectable difference" stood beside a rank test's p of 0.019)."""
    if c["blocking"]:
        why = next(f["message"] for f in c["findings"] if f["blocking"])
        return f"decision: cannot tell: {why}"
    called: dict[str, list[str]] = {"faster": [], "slower": []}
    judged = too_few = 0
    for m, mc in c["metrics"].items():
        for p, d in mc["percentiles"].items():
            if d["verdict"] in called and d["a"] and d["diff"] is not None:
                called[d["verdict"]].append(f"{m} {p} {d['diff'] / d['a']:+.0%}")
            judged += d["verdict"] not in ("too few samples", "not exercised")
            too_few += d["verdict"] == "too few samples"
    effect = c.get("min_effect", MIN_EFFECT)
    if not judged:
        state = "cannot tell" if too_few else "not exercised"
        return f"decision: {state} (no latency line had enough samples on both sides)"
    tail = " (confounded: see the NOTE below)" if c["confounded"] else ""
    if not called["faster"] and not called["slower"]:
        return (
            f"decision: no detectable difference{tail}: no line's B-A reached {effect:.0%} "
            "of A with an interval off 0 and a Holm-adjusted p under 0.05"
        )
    parts = [f"B {v} on {', '.join(lines)}" for v, lines in called.items() if lines]
    return f"decision: {'; '.join(parts)}{tail}"


def render_comparison(c: Comparison) -> str:
    """The comparison as text: its decision in one line, the findings, figures side by
    side, then the latency lines."""
    a, b = c["a"], c["b"]
    lines = textwrap.wrap(decision_line(c), 80, subsequent_indent="  ")
    lines += [f"{'STOP' if f['blocking'] else 'NOTE'}: {f['message']}" for f in c["findings"]]
    lines += [
        f"A (baseline)  = {', '.join(a['runs'])} ({a['endpoint']})",
        f"B (candidate) = {', '.join(b['runs'])} ({b['endpoint']})",
        "",
        f"{'':<26}{'A':>12}{'B':>12}",
    ]
    for key in SIDE_FIELDS:
        va, vb = _field(a, key), _field(b, key)
        if va is not None or vb is not None:
            lines.append(f"{key:<26}{_fmt(va):>12}{_fmt(vb):>12}")
    lines += _cost_lines(c) + _acceptance_lines(c) + _over_time_lines(c)
    savings = c.get("agent_trace")
    if savings is not None:
        lines += render_savings(savings, c["confounded"])
    lines += _latency_lines(c)
    parts = c.get("reasoning")
    if parts is not None:
        lines += ["", *render_parts(parts)]
    if len(a["runs"]) < 2 or len(b["runs"]) < 2:
        # benchmarks/bench_compare_fpr.py: identical simulators are flagged far more often
        # at 2% than with the one-run bar (the rates: docs/capacity-and-ab.md).
        effect = c.get("min_effect", MIN_EFFECT)
        lines.append(
            f"(one run on a side: what moved that whole run is not in the intervals, so a "
            f"line needs |B-A| >= {effect:.0%} of A; two or more runs a side, as ab runs "
            "by default, put it there)"
        )
    for side, by_metric in (c.get("spread") or {}).items():
        for m, by_p in by_metric.items():
            runs = by_p["p50"]["runs"]
            lines.append(
                f"{side.upper()}'s {m} p50 run by run: {', '.join(f'{v:.2f}' for v in runs)} "
                f"(stdev {by_p['p50']['stdev']:.2f})"
            )
    eq = c["equivalence"]
    if eq:
        lines += _equivalence_lines(eq)
    return "\n".join(lines)
