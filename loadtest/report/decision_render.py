"""The decision as a terminal table: categories as rows, load steps as columns.

Each category takes a line of verdicts and, under it, a line per deciding metric with
its effect in percent of the baseline and the 95% interval (``-31 [-35,-27]``). Laid
out for ``WIDTH`` columns with up to five steps (a label of 14, cells of 13); the
brackets and the gate follow as prose, wrapped to fit.
"""

from __future__ import annotations

from loadtest.engine.block_text import WIDTH, fit
from loadtest.model.decision import CellVerdict, Decision, DecisionCell, DecisionRow
from loadtest.report.acceptance_time import positions_said
from loadtest.report.decision import METRIC_LABELS

__all__ = ["cell_text", "render_decision", "row_label"]

LABEL = 14
CELL = 13
SAID: dict[CellVerdict, str] = {
    "faster": "faster",
    "slower": "SLOWER",
    "no difference": "no diff",
    "cannot tell": "cannot tell",
    "not exercised": "n/a",
}


def _pct(v: float, sign: str = "+") -> str:
    # round first: -0.3% is said 0, not -0
    return f"{round(v * 100) + 0:{sign}.0f}"


def cell_text(cell: DecisionCell, width: int = CELL - 1) -> str:
    """``-31 [-35,-27]``: the effect and its interval in percent, cut to ``width``."""
    e, lo, hi = cell["effect"], cell["effect_low"], cell["effect_high"]
    if e is None:
        return "-"
    head = _pct(e)
    if lo is None or hi is None:
        return head
    interval = f"[{_pct(lo, '')},{_pct(hi, '')}]"
    for text in (f"{head} {interval}", head + interval):
        if len(text) <= width:
            return text
    return head


def _row(label: str, cells: list[str]) -> str:
    short = label if len(label) < LABEL else label[: LABEL - 2] + "~"
    return (f"{short:<{LABEL}}" + "".join(f"{c:<{CELL}}" for c in cells)).rstrip()


def acceptance_lines(d: Decision) -> list[str]:
    """Per load and candidate: acceptance by position, tokens a step over the run's
    intervals, and any collapse (in capitals: it is the finding)."""
    out: list[str] = []
    for a in d.get("acceptance") or []:
        if a["tokens_per_step"] is None and not a["per_position"]:
            continue
        if not out:
            out += ["", "acceptance of the candidate (by draft position; tokens a verify step):"]
        k = "" if a["draft_max"] is None else f" K={a['draft_max']}"
        tps = "-" if a["tokens_per_step"] is None else f"{a['tokens_per_step']:.2f}"
        out.append(f"  {d['kind'][0]}={a['load']:g}{k}: {tps} tokens a step; by position")
        out.append(f"    {positions_said(a)}")
        for i, run in enumerate(a["runs"], 1):
            over = " ".join(
                "." if v["tokens_per_step"] is None else f"{v['tokens_per_step']:.1f}"
                for v in run["intervals"]
            )
            said = f"COLLAPSE: {run['collapse']}" if run["collapse"] else "no collapse"
            out.append(f"    run {i} over time: {over}  {said}")
    return out


def memory_lines(d: Decision) -> list[str]:
    """``--memory-budget``: the verdict, then each side at each load."""
    m = d.get("memory")
    if m is None:
        return []
    head = {
        True: "every deployment fits",
        False: "a deployment does NOT fit",
        None: "cannot tell for every side (only the deployments ab starts are sampled)",
    }[m["fits"]]
    out = ["", f"memory budget {m['budget']} ({m['budget_mib']:.0f} MiB): {head}"]
    for s in m["sides"]:
        out.append(f"  {d['kind'][0]}={s['load']:g} {s['deployment'] or s['side']}: {s['note']}")
    return out


def row_label(row: DecisionRow, width: int | None = None) -> str:
    """``code``, or ``code K=4`` for a draft length of a ``--draft-max`` sweep; cut to
    ``width`` in the category, so that the K stays in sight."""
    k = row.get("draft_max")
    if k is None:
        return row["category"]
    name, suffix = ("mix" if row["category"] == "whole mix" else row["category"]), f" K={k}"
    room = len(name) if width is None else width - len(suffix)
    return (name if len(name) <= room else name[: max(room - 1, 1)] + "~") + suffix


def search_lines(d: Decision) -> list[str]:
    """``ab --search``: the steps in the order run, why each, and each category's answer."""
    search = d.get("search")
    if search is None:
        return []
    kind = search["kind"]
    lines = ["", f"search, {kind} {search['lo']:g}..{search['hi']:g}, steps in the order run:"]
    for i, probe in enumerate(search["probes"]):
        lines.append(f"  {i + 1}. {kind} {probe['load']:g}: {probe['plan']}")
    lines.append(f"  stopped: {search['stopped_because']}")
    lines.append(f"  error control: {search['spending']}")
    lines.append("answer:")
    for c in search["crossovers"]:
        lines.append(f"  {c['category']}: {c['text']}")
    if not search["crossovers"]:
        lines.append("  not exercised: no step was judged")
    return lines


def render_decision(d: Decision) -> str:
    """The decision table, the brackets and, where gated, the gate."""
    kind = d["kind"]
    head = [f"{kind[0]}={load:g}" for load in d["loads"]]
    lines = [
        f"decision: candidate against baseline, per category, {kind} "
        + ", ".join(f"{load:g}" for load in d["loads"]),
        "  effect = (B - A) / A in %, [95% interval]; called faster/SLOWER with Holm over "
        + (
            f"{d['family_size']} tests of the sweep"
            if "search" not in d
            else "each step's tests at the step's share of alpha (below)"
        )
        + f" and |effect| >= {d['min_effect']:.0%}"
        + (
            f" (asked {d['min_effect_asked']:.0%}, one run a side)"
            if d["min_effect"] != d["min_effect_asked"]
            else ""
        )
        + "; good/s: + is more",
        "",
        _row("category", head),
        "-" * min(WIDTH, LABEL + CELL * len(head)),
    ]
    for row in d["rows"]:
        label = row_label(row, LABEL - 1)
        lines.append(_row(label, [SAID[c["verdict"]] for c in row["steps"]]))
        for j, metric in enumerate(row["deciding"]):
            label = "  " + METRIC_LABELS[metric]
            lines.append(_row(label, [cell_text(c["cells"][j]) for c in row["steps"]]))
    blocked = [s for s in d["steps"] if s["blocked"]]
    for s in blocked:
        lines.append(f"{kind} {s['load']:g}: cannot tell: {s['blocked']}")
    lines.append("")
    lines.append("where the candidate stops paying:")
    for row in d["rows"]:
        b = row["bracket"]
        crossing = (
            f"; the effect crosses zero near {b['crossover']:.3g} (interpolated)"
            if b["crossover"] is not None
            else ""
        )
        lines.append(f"  {row_label(row)}: {b['text']}{crossing}")
        why = {c["why"] for call in row["steps"] for c in call["cells"] if c["why"]}
        if why and row["category"] == "whole mix":
            lines.append(f"    ({'; '.join(sorted(why))})")
    draft = d.get("draft")
    if draft is not None:
        lines.append("")
        lines.append(
            f"draft length, K = {draft['setting']}: the shortest time to a correct action "
            "(the fastest K against each other K, in the same Holm family)"
        )
        for pick in draft["picks"]:
            lines.append(f"  {kind} {pick['load']:g}, {pick['category']}: {pick['text']}")
        if not draft["picks"]:
            lines.append("  not exercised (no step where two Ks could be compared)")
    lines += search_lines(d)
    lines += acceptance_lines(d)
    lines += memory_lines(d)
    if d.get("budget"):
        lines.append(str(d.get("budget")))
    gate = d.get("gate")
    if gate is not None:
        where = (
            f"at {kind} {gate['operating_point']:g}"
            if gate["operating_point"] is not None
            else "at any step"
        )
        said = "FAILED: " + "; ".join(gate["reasons"]) if gate["failed"] else "passed"
        lines.append(f"gate --fail-on slower {where}: {said}")
    return fit(lines)
