"""The comparison section of ``loadtest report``: an ``ab`` or ``compare`` folder's
comparison.json as tables, with the percentile plots of both sides."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from loadtest.model.json import JsonObject
from loadtest.report.hlog import merged_metric
from loadtest.report.html_page import Page, esc, table
from loadtest.report.plots import percentile_figure

__all__ = ["comparison_section"]


def comparison_section(page: Page, folder: Path, raw: JsonObject) -> None:
    from typing import cast

    from loadtest.measure.stats import format_p
    from loadtest.model.comparison import Comparison
    from loadtest.report.compare_figures import SIDE_FIELDS
    from loadtest.report.compare_render import acceptance_rows, cost_rows, line_verdict

    c = cast(Comparison, raw)  # comparison.json as compare_runs wrote it
    a, b = c["a"], c["b"]
    for f in c.get("findings", []):
        page.add(f"<p><b>{'STOP' if f['blocking'] else 'NOTE'}</b>: {esc(f['message'])}</p>")
    page.add(
        f"<p>A (baseline): {esc(a['endpoint'])}, runs {esc(', '.join(a['runs']))}<br>"
        f"B (candidate): {esc(b['endpoint'])}, runs {esc(', '.join(b['runs']))}</p>"
    )
    sa: Mapping[str, object] = a  # looked up by field name below
    sb: Mapping[str, object] = b
    rows = [
        (k, sa.get(k), sb.get(k))
        for k in SIDE_FIELDS
        if sa.get(k) is not None or sb.get(k) is not None
    ]
    page.add(table(("figure", "A", "B"), rows))
    costs = cost_rows(c)
    if costs:
        energy = "".join(
            f"<br>energy {n}: {esc(dc['energy'])}"
            for n, side in (("A", a), ("B", b))
            if (dc := side.get("deployment_cost")) is not None
        )
        page.add(
            "<h2>Deployment cost</h2><p>Measured by ab on the servers it started: cold start "
            "at each start, resident memory sampled through each run (steady = median), "
            f"energy from the machine's counters.{energy}</p>" + table(("figure", "A", "B"), costs)
        )
    acc = acceptance_rows(c)
    if acc:
        page.add(
            "<h2>Speculative acceptance per category</h2><p>Engine: accepted / drafted, and "
            "accepted per step = accepted / (output - accepted) (every verify step emits the "
            "target's token plus the drafts it accepted). loadtest: tokens per step - 1, from "
            "the bursts of chunks on the stream. Agree: tokens per step within "
            f"{acc[0][-2]} of each other.</p>"
            + table(
                (
                    "side",
                    "category",
                    "engine acceptance",
                    "engine accepted/step",
                    "loadtest accepted/step",
                    "tolerance",
                    "agree",
                ),
                acc,
            )
        )
    srows = []
    for m, mc in c["metrics"].items():
        for p, d in mc["percentiles"].items():
            # Each line carries its own verdict: a faster median says nothing of the tail.
            srows.append(
                (
                    m,
                    p,
                    d["a"],
                    d["b"],
                    d["diff"],
                    "-"
                    if d["ci_low"] is None or d["ci_high"] is None
                    else f"[{d['ci_low']:.2f}, {d['ci_high']:.2f}]",
                    format_p(d.get("p_holm")),
                    line_verdict(c, d),
                    format_p(mc["p_value"]),
                )
            )
    effect = c.get("min_effect", 0.02)
    page.add(
        "<h2>Latency, B - A with 95% bootstrap intervals</h2>"
        f"<p>A line is called faster or slower when its p-value, adjusted over all lines "
        f"(Holm), is below 0.05 and |B - A| is at least {effect:.0%} of A.</p>"
        + table(
            ("metric", "pct", "A", "B", "B-A", "95% CI", "p (Holm)", "verdict", "rank test p"),
            srows,
        )
    )
    eq = c.get("equivalence")
    if eq:
        page.add(
            f"<h2>Output equivalence</h2><p>{eq['matching']} of {eq['prompts_compared']} "
            f"prompts answered identically ({eq['match_rate']:.1%}); "
            f"{esc(eq.get('attributed', '–'))} diverge only on B (the baseline answered "
            "them alike every time).</p>"
        )
        if eq["divergent"]:
            page.add(
                table(
                    ("prompt", "A", "B"),
                    [(d["prompt_id"], d["a"], d["b"]) for d in eq["divergent"]],
                )
            )
    sides = {s: sorted((folder / s).glob("*/histograms.hlog")) for s in ("baseline", "candidate")}
    if all(sides.values()):
        for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
            hists = {s: merged_metric(paths, m) for s, paths in sides.items()}
            if not any(h.get_total_count() for h in hists.values()):
                no_tpot = "(answers with tool calls have no TPOT)"
                page.add(f"<p>{m}: no values on either side {no_tpot}; no plot.</p>")
                continue
            page.plot(percentile_figure(hists, m), f"{m}-percentiles", m)
