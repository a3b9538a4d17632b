"""Plots for capacity reviews (matplotlib, headless): each saved as PNG and SVG.

- ``capacity_figure``: latency against achieved throughput over a sweep's steps;
- ``percentile_figure``: a latency distribution on HdrHistogram's log percentile axis
  (x = 1 / (1 - p): 90%, 99%, 99.9% equally spaced), one line per run;
- ``timeline_figure``: requests/s and TTFT p95 per interval of a run, fault windows shaded;
- ``decision_figure``: per category, both sides' deciding metric against load (ab --sweep).

Every legend sits outside the axes, so none covers data; a percentile curve stops at
the percentile its sample supports. An SLO limit is a horizontal line where the data
reach near it; one far beyond them (2,000 ms over data at 20-50 ms) would squash the
curves into a flat line along the edge, so the axis keeps to the data and the limit is
marked at that edge instead (``SLO p99 2000 ms ↑``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import matplotlib

matplotlib.use("Agg")  # never a window: reports are written from terminals and CI

import matplotlib.pyplot as plt
from hdrh.histogram import HdrHistogram
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from loadtest.measure.hdr import fast_percentile
from loadtest.model.decision import Decision
from loadtest.model.sweep import CapacityResult, step_stat
from loadtest.model.verdict import FaultVerdict

__all__ = [
    "DATA_SHARE",
    "capacity_figure",
    "decision_figure",
    "percentile_curve",
    "percentile_figure",
    "save_figure",
    "slo_place",
    "timeline_figure",
]

_PCTS = (0.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 99.95, 99.99, 99.999)


def _legend_outside(ax: Axes) -> None:
    """The legend to the right of the axes: inside, "best" still covers points."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize=8)


DATA_SHARE = 1 / 3
"""An SLO line is drawn when the data would still fill at least this share of the y axis
stretched to reach it; otherwise it is marked at the edge."""

SloPlace = Literal["line", "above", "below"]


def slo_place(limit: float, low: float, high: float) -> SloPlace:
    """Where the SLO ``limit`` goes on an axis whose data span ``low``..``high``: a line,
    or a mark at the top (``above``) or bottom (``below``) edge of an axis kept to them."""
    if not (math.isfinite(low) and math.isfinite(high)) or low <= limit <= high:
        return "line"
    span = max(high, limit) - min(low, limit)
    if (high - low) >= DATA_SHARE * span:
        return "line"
    return "above" if limit > high else "below"


def _limit_lines(ax: Axes, metric: str, limits: Mapping[str, float]) -> None:
    """Each SLO on ``metric`` (``limits``: ``ttft_ms.p95`` -> ms) as a dashed line, or,
    when it lies far off the data, as a mark at the edge it lies beyond (call it after
    the data are plotted and before anything else)."""
    low, high = ax.dataLim.y0, ax.dataLim.y1
    marks = {"above": 0, "below": 0}
    for label, limit in sorted(limits.items()):
        name, _, stat = label.partition(".")
        if name != metric:
            continue
        text = f"SLO {stat} {limit:g} ms"
        place = slo_place(limit, low, high)
        if place == "line":
            ax.axhline(limit, color="tab:red", linestyle="--", linewidth=1, label=text)
            continue
        # Top left / bottom right: latency curves rise to the right, so those corners
        # are the empty ones.
        up = place == "above"
        n = marks[place]
        marks[place] += 1
        ax.annotate(
            f"{text} {'↑' if up else '↓'}",
            xy=(0.01, 0.99 - 0.07 * n) if up else (0.99, 0.01 + 0.07 * n),
            xycoords="axes fraction",
            ha="left" if up else "right",
            va="top" if up else "bottom",
            color="tab:red",
            fontsize=8,
            bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "tab:red", "alpha": 0.9},
        )


def save_figure(fig: Figure, stem: Path) -> list[Path]:
    """Write ``stem.png`` and ``stem.svg``; close the figure."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    paths = [stem.with_suffix(".png"), stem.with_suffix(".svg")]
    fig.savefig(paths[0], dpi=110, bbox_inches="tight")
    fig.savefig(paths[1], bbox_inches="tight")
    plt.close(fig)
    return paths


def capacity_figure(
    result: CapacityResult,
    metrics: Sequence[str] = ("ttft_ms", "e2e_ms"),
    limits: Mapping[str, float] | None = None,
) -> Figure:
    """p50/p95/p99 of ``metrics`` against achieved requests/s, one point per sweep step;
    ``limits`` (``ttft_ms.p95`` -> ms) drawn as lines."""
    fig, axes = plt.subplots(1, len(metrics), figsize=(6.5 * len(metrics), 4), squeeze=False)
    rows = result["steps"]
    x = [r["requests_per_s"] for r in rows]
    for ax, m in zip(axes[0], metrics, strict=True):
        for p, style in (("p50", "o-"), ("p95", "s--"), ("p99", "^:")):
            y = [step_stat(r, m, p) for r in rows]
            pts = [(a, b) for a, b in zip(x, y, strict=True) if b is not None]
            if pts:
                ax.plot(*zip(*pts, strict=True), style, label=p)
        for i, r in enumerate(rows):
            p50 = step_stat(r, m, "p50")
            if p50 is not None:
                # Below and above the line in turn, boxed: close steps stay legible.
                ax.annotate(
                    f"{r['load']:g}",
                    (r["requests_per_s"], p50),
                    fontsize=9,
                    textcoords="offset points",
                    xytext=(4, -14 if i % 2 else 6),
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8},
                )
        _limit_lines(ax, m, limits or {})
        if result["knee"] is not None:
            knee = next(r for r in rows if r["load"] == result["knee"])
            ax.axvline(knee["requests_per_s"], color="grey", linestyle=":", label="knee")
        ax.set_xlabel("achieved requests/s")
        ax.set_ylabel(f"{m} (ms)")
        ax.set_title(f"{m} against throughput ({result['kind']} steps labelled)")
        ax.grid(True, alpha=0.3)
        _legend_outside(ax)
    fig.tight_layout()
    return fig


def percentile_curve(hist: HdrHistogram) -> tuple[list[float], list[float]]:
    """(1 / (1 - p), value in ms) at the plotted percentiles the sample supports.

    n values say nothing beyond the percentile 1 - 1/n (past it there is only the
    largest value): the curve stops there, instead of drawing a flat tail to 99.999 %
    from 100 requests.
    """
    n = hist.get_total_count()
    if not n:
        return [], []
    top = 100.0 * (1.0 - 1.0 / n)
    pcts = [p for p in _PCTS if p <= top + 1e-9]
    if pcts[-1] < top - 1e-9:
        pcts.append(top)
    xs = [1.0 / (1.0 - p / 100.0) for p in pcts]
    ys = [fast_percentile(hist, p) / 1000.0 for p in pcts]
    return xs, ys


def percentile_figure(
    hists: dict[str, HdrHistogram], metric: str, limits: Mapping[str, float] | None = None
) -> Figure:
    """``metric``'s distribution per run (label -> histogram in µs) on a log percentile
    axis; ``limits`` (``ttft_ms.p95`` -> ms) drawn as lines."""
    fig, ax = plt.subplots(figsize=(8, 4))
    for label, hist in hists.items():
        if hist.get_total_count():
            ax.plot(
                *percentile_curve(hist), marker=".", label=f"{label} (n={hist.get_total_count()})"
            )
    _limit_lines(ax, metric, limits or {})
    ax.set_xscale("log")
    ticks = [1.0 / (1.0 - p / 100.0) for p in (0.0, 90.0, 99.0, 99.9, 99.99, 99.999)]
    ax.set_xticks(ticks, ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"])
    ax.set_xlabel("percentile")
    ax.set_ylabel(f"{metric} (ms)")
    ax.set_title(f"{metric} distribution")
    ax.grid(True, which="both", alpha=0.3)
    _legend_outside(ax)
    fig.tight_layout()
    return fig


def timeline_figure(
    intervals: dict[str, list[tuple[float, float, HdrHistogram]]],
    faults: Sequence[FaultVerdict] = (),
) -> Figure:
    """Completed requests/s and TTFT p95 per interval, fault windows shaded."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5), sharex=True)
    e2e = intervals.get("e2e_ms", [])
    t = [s + length / 2 for s, length, _ in e2e]
    top.plot(t, [h.get_total_count() / max(length, 1e-9) for _, length, h in e2e], "-")
    top.set_ylabel("ok requests/s")
    ttft = intervals.get("ttft_ms", [])
    pts = [
        (s + length / 2, fast_percentile(h, 95) / 1000.0)
        for s, length, h in ttft
        if h.get_total_count()
    ]
    if pts:
        bottom.plot(*zip(*pts, strict=True), "-", color="tab:red")
    bottom.set_ylabel("TTFT p95 (ms)")
    bottom.set_xlabel("seconds from the start")
    for f in faults:
        for ax in (top, bottom):
            ax.axvspan(f["start_s"], f["end_s"], color="orange", alpha=0.2)
        top.annotate(
            f"{f['name'] or f['kind']}: {f['verdict']}",
            (f["start_s"], 0),
            xycoords=("data", "axes fraction"),
            fontsize=8,
            xytext=(2, 2),
            textcoords="offset points",
        )
    for ax in (top, bottom):
        ax.grid(True, alpha=0.3)
    if not any(math.isfinite(x) for x in t):
        top.text(0.5, 0.5, "no intervals", transform=top.transAxes, ha="center")
    fig.tight_layout()
    return fig


def decision_figure(decision: Decision) -> Figure:
    """Per category, the quoted deciding metric of both sides against load; the
    bracket where the candidate stops paying shaded, the interpolated crossing a line."""
    rows = decision["rows"]
    fig, axes = plt.subplots(1, len(rows), figsize=(5.5 * len(rows), 3.8), squeeze=False)
    for ax, row in zip(axes[0], rows, strict=True):
        metric = row["deciding"][0]
        firsts = [(call["load"], call["cells"][0]) for call in row["steps"]]
        for side, style, pts in (
            ("A baseline", "o-", [(x, c["a"]) for x, c in firsts if c["a"] is not None]),
            ("B candidate", "s--", [(x, c["b"]) for x, c in firsts if c["b"] is not None]),
        ):
            if pts:
                ax.plot(*zip(*pts, strict=True), style, label=side)
        b = row["bracket"]
        if b["faster_to"] is not None and b["slower_from"] is not None:
            ax.axvspan(
                b["faster_to"],
                b["slower_from"],
                color="tab:orange",
                alpha=0.12,
                label="faster .. slower",
            )
        if b["crossover"] is not None:
            ax.axvline(b["crossover"], color="tab:red", linestyle=":", label="crossing")
        ax.set_xscale("log", base=2)
        ax.set_xticks(decision["loads"], [f"{x:g}" for x in decision["loads"]])
        ax.set_xlabel(decision["kind"])
        unit = "good requests/s" if metric == "goodput_per_s" else "median ms"
        ax.set_ylabel(f"{metric} ({unit})")
        k = row.get("draft_max")
        ax.set_title(row["category"] if k is None else f"{row['category']} K={k}")
        ax.grid(True, alpha=0.3)
        _legend_outside(ax)
    fig.tight_layout()
    return fig
