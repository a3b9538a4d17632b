"""The decision of ``ab --sweep`` at the top of its folder's HTML report.

The same table as the terminal's (``decision_render``): categories as rows, load steps
as columns, each cell the verdict and the effect with its interval; then the brackets,
and the plot of the deciding metric against load for both sides with the bracket and
the crossing marked. Each step's own comparison is in its folder
(``loadtest report FOLDER/step-NN-LOAD``).
"""

from __future__ import annotations

import html
from typing import Any, Protocol

from loadtest.model.decision import Decision
from loadtest.report.decision import METRIC_LABELS
from loadtest.report.decision_render import (
    SAID,
    acceptance_lines,
    cell_text,
    memory_lines,
    row_label,
    search_lines,
)
from loadtest.report.plots import decision_figure

__all__ = ["decision_section"]


class Page(Protocol):
    """What the section writes to (``html._Page``)."""

    def add(self, text: str) -> None: ...

    def plot(self, fig: Any, name: str, alt: str) -> None: ...


_CLASS = {"faster": "good", "slower": "bad"}


def _cell(verdict: str, effects: list[str]) -> str:
    said = html.escape(SAID.get(verdict, verdict))  # type: ignore[call-overload]
    cls = _CLASS.get(verdict)
    head = f'<span class="{cls}">{said}</span>' if cls else said
    return head + "".join(f"<br>{html.escape(e)}" for e in effects)


def decision_section(page: Page, d: Decision) -> None:
    """The decision table, the brackets, the gate and the plot."""
    kind = d["kind"]
    head = "".join(f"<th>{kind} {load:g}</th>" for load in d["loads"])
    body = []
    for row in d["rows"]:
        metrics = ", ".join(METRIC_LABELS[m] for m in row["deciding"])
        cells = "".join(
            "<td>"
            + _cell(
                call["verdict"],
                [f"{METRIC_LABELS[c['metric']]} {cell_text(c, 40)}" for c in call["cells"]],
            )
            + "</td>"
            for call in row["steps"]
        )
        body.append(f"<tr><td>{html.escape(row_label(row))}<br>({metrics})</td>{cells}</tr>")
    page.add(
        f"<h2>The decision, per category and {kind}</h2>"
        f"<p>Effect = (B - A) / A in %, [95% interval]; called faster or slower with Holm "
        f"over {d['family_size']} tests of the whole sweep and |effect| at least "
        f"{d['min_effect']:.0%}. Goodput: + is more. {html.escape(d['family'])}.</p>"
        f"<table><tr><th>category</th>{head}</tr>{''.join(body)}</table>"
    )
    items = "".join(
        f"<li><b>{html.escape(row_label(r))}</b>: {html.escape(r['bracket']['text'])}"
        + (
            f"; the effect crosses zero near {r['bracket']['crossover']:.3g} (interpolated)"
            if r["bracket"]["crossover"] is not None
            else ""
        )
        + "</li>"
        for r in d["rows"]
    )
    page.add(f"<h2>Where the candidate stops paying</h2><ul>{items}</ul>")
    draft = d.get("draft")
    if draft is not None:
        picks = "".join(
            f"<li>{kind} {p['load']:g}, <b>{html.escape(p['category'])}</b>: "
            f"{html.escape(p['text'])}</li>"
            for p in draft["picks"]
        )
        page.add(
            f"<h2>Draft length</h2><p>K = {html.escape(draft['setting'])}; the fastest K "
            "on the time to a correct action against each other K, in the same Holm "
            f"family.</p><ul>{picks or '<li>not exercised</li>'}</ul>"
        )
    searched = [line for line in search_lines(d) if line]
    if searched:  # ab --search: the steps in the order run, the error control, the answer
        page.add(f"<h2>The search</h2><pre>{html.escape(chr(10).join(searched))}</pre>")
    said_costs = [line for line in (*acceptance_lines(d), *memory_lines(d)) if line]
    if said_costs:
        # The terminal's lines as they are: one wording of acceptance and memory.
        text = html.escape("\n".join(said_costs))
        page.add(f"<h2>Acceptance and memory of the candidate</h2><pre>{text}</pre>")
    gate = d.get("gate")
    if gate is not None:
        said = "failed: " + "; ".join(gate["reasons"]) if gate["failed"] else "passed"
        page.add(f"<p>Gate <code>--fail-on slower</code>: {html.escape(said)}</p>")
    page.plot(decision_figure(d), "decision", "deciding metric against load")
