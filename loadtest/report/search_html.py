"""The capacity search in ``loadtest report``: its answer, every point, and the fit.

The plot puts each SLO's margin (value over limit) against load: every run as a point
(filled: met, hollow: missed), the monotone fit through them, the limit at 1, and the
bracket the search closed shaded; the points are numbered in the order the plan ran
them, so the probing, the bisection and the confirmations can be read off the plot.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # never a window: reports are written from terminals and CI

import matplotlib.pyplot as plt
from matplotlib import ticker
from matplotlib.figure import Figure

from loadtest.model.search import SearchResult
from loadtest.report.html_page import Page, esc, table

__all__ = ["search_figure", "search_section"]


def search_figure(result: SearchResult) -> Figure:
    """Each SLO's margin against load, with the fit and the bracket (see the docstring)."""
    fig, ax = plt.subplots(figsize=(8, 4.5))
    kind = result["search"]["kind"]
    b = result["bracket"]
    if b["passes"] is not None and b["fails"] is not None:
        ax.axvspan(b["passes"], b["fails"], color="#cde", alpha=0.6, label="bracket")
    ax.axhline(1.0, color="#b00", linestyle="--", linewidth=1, label="limit")
    for fit in result["fit"]:
        slo = fit["slo"]
        runs = [
            (i, p["load"], m["margin"], p["outcome"])
            for i, p in enumerate(result["points"])
            for m in p["margins"]
            if m["slo"] == slo
        ]
        line = ax.plot(fit["loads"], fit["fitted"], label=f"{slo} fit")
        colour = line[0].get_color()
        for i, load, margin, outcome in runs:
            ax.plot(
                [load],
                [margin],
                "o",
                color=colour,
                markerfacecolor=colour if outcome == "pass" else "white",
            )
            ax.annotate(
                str(i + 1), (load, margin), fontsize=8, xytext=(3, 3), textcoords="offset points"
            )
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ticker.ScalarFormatter())
    ax.set_yscale("log")
    ax.set_xlabel(kind)
    ax.set_ylabel("SLO value / limit")
    ax.legend(fontsize=8)
    ax.set_title(result["answer"], fontsize=9, wrap=True)
    fig.tight_layout()
    return fig


def search_section(page: Page, folder: Path, result: SearchResult) -> None:
    """The answer, the bracket, a row per point (as run) and the plot."""
    b = result["bracket"]
    page.add(
        f"<p><b>{esc(result['answer'])}</b> ({result['runs']} runs; "
        f"{esc(result['stopped_because'])}).</p>"
    )
    page.add(
        table(
            (
                "met up to",
                "fails from",
                "every run passed up to",
                "every run failed from",
                "closed",
            ),
            [(b["passes"], b["fails"], b["low"], b["high"], "yes" if b["closed"] else "no")],
        )
    )
    rows = [
        (
            i + 1,
            p["load"],
            p["outcome"],
            "; ".join(f"{m['slo']} {m['margin']:.3g}" for m in p["margins"]),
            p["plan"],
            p["run"],
        )
        for i, p in enumerate(result["points"])
    ]
    head = ("#", result["search"]["kind"], "SLOs", "value / limit", "why this load", "run")
    page.add(table(head, rows))
    page.plot(search_figure(result), "search", "each SLO's margin against load, with the fit")
