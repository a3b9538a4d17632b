"""``loadtest report``: one self-contained HTML file for a run, a sweep or a comparison.

Tables come from the folder's JSON (summary.json, capacity.json, comparison.json or an
ab sweep's decision.json),
plots from its histograms; every plot is also saved as PNG and SVG under ``plots/`` and
embedded in the page as a data URI, so the page has no outside reference and can be
attached to a capacity review as it is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import orjson

from loadtest.errors import UsageError
from loadtest.model.atomic import write_atomic
from loadtest.model.io import load_capacity, load_decision, load_search, load_summary
from loadtest.model.json import JsonObject
from loadtest.model.summary import MetricStats, StatKey, Summary
from loadtest.model.sweep import CapacityResult, best_load_text, knee_text
from loadtest.model.verdict import STATE_OF, FaultVerdict
from loadtest.report.evidence import rebuilt_note
from loadtest.report.hlog import merged_metric, read_hlog, read_intervals
from loadtest.report.html_compare import comparison_section
from loadtest.report.html_page import Page, esc, met, table
from loadtest.report.plots import (
    capacity_figure,
    percentile_figure,
    timeline_figure,
)
from loadtest.report.rebuild import is_run_folder, summary_of
from loadtest.report.run_notes import corrected_counts_note
from loadtest.report.table import ANSWER_METRICS, LATENCY_ORDER

__all__ = ["latency_order", "write_report"]


def _fault_row(f: FaultVerdict) -> tuple[object, ...]:
    """A fault window's row; no figures for a window nothing was tried in (the few that
    fell in were chance, not its evidence)."""
    figures: tuple[float | None, ...] = (None,) * 4
    if STATE_OF[f["verdict"]] != "not_exercised":
        b, d, a = (f[p]["ttft_p95_ms"] for p in ("before", "during", "after"))
        figures = (b, d, a, f["recovery_s"])
    where = (f["name"] or f["kind"], f["kind"], f["start_s"], f["end_s"])
    return (*where, *figures, f["verdict"], f["reason"])


def _load(path: Path) -> JsonObject:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise UsageError(f"{path}: cannot read it ({exc})") from exc
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a JSON object")
    return data


_STATS: tuple[StatKey, ...] = ("count", "p50", "p90", "p95", "p99", "max")


def _limits(summary: Summary) -> dict[str, float]:
    """The run's latency SLOs (``ttft_ms.p95`` -> ms), drawn as lines on its plots."""
    return {c["slo"]: c["limit"] for c in summary["slo"]["checks"] if "." in c["slo"]}


def _run_section(page: Page, folder: Path, summary: Summary) -> None:
    run, req = summary["run"], summary["requests"]
    note = rebuilt_note(summary)
    if note is not None:  # first: every figure below stands on it
        page.add(f'<p class="bad">{esc(note)}</p>')
    page.add(
        table(
            ("run", "value"),
            [
                ("scenario", run["scenario"]),
                ("endpoint", run["endpoint"]),
                ("model", run["model"]),
                ("started", run["started_at"]),
                ("measured seconds", run["measured_s"]),
                (
                    "sent / ok / failed / cancelled",
                    f"{req['sent']} / {req['ok']} / {req['failed']} / {req['cancelled']}",
                ),
                ("errors", ", ".join(f"{k}: {v}" for k, v in req["errors"].items()) or "none"),
                ("requests/s", summary["throughput"]["requests_per_s"]),
                ("output tokens/s", summary["throughput"]["output_tokens_per_s"]),
            ],
        )
    )
    metrics = summary["metrics"]
    order = latency_order(metrics, reasoned="reasoning" in summary)
    rows = [(m, *(metrics[m].get(k) for k in _STATS)) for m in order]
    page.add("<h2>Latency (ms)</h2>" + table(("metric", *_STATS), rows))
    note = corrected_counts_note(metrics, shown=order)
    if note:
        page.add(f"<p>{esc(note)}</p>")
    slo = summary["slo"]
    if slo["checks"]:
        checks = [
            (
                c["slo"],
                c["limit"],
                c["value"],
                met(c["met"], c if "need" in c else None, req["warmup"]),
            )
            for c in slo["checks"]
        ]
        body = table(("objective", "limit", "value", "met"), checks)
        page.add("<h2>SLOs</h2>" + body)
        good = slo.get("goodput")
        if good:
            page.add(
                f"<p>Goodput: {good['requests']} requests within every limit, "
                f"{good['per_s']:.2f}/s ({good['share']:.0%} of ok requests).</p>"
            )
    faults = summary.get("faults") or []
    if faults:
        frows = [_fault_row(f) for f in faults]
        head: tuple[str, ...] = ("window", "kind", "start s", "end s", "TTFT p95 before")
        head += ("during", "after", "recovery s", "verdict", "reason")
        page.add("<h2>Fault windows</h2>" + table(head, frows))
    hlog = folder / "histograms.hlog"
    intervals = read_intervals(hlog) if hlog.exists() else {}
    if not intervals:  # a damaged folder: said on the page, not left out without a word
        page.add(f"<p>{esc(str(hlog))}: missing or empty, so no plots over time.</p>")
    else:
        page.plot(timeline_figure(intervals, faults), "timeline", "timeline")
        totals = read_hlog(hlog)
        for m in ("ttft_ms", "e2e_ms"):
            if m in totals and totals[m].get_total_count():
                fig = percentile_figure({run["id"]: totals[m]}, m, _limits(summary))
                page.plot(fig, f"{m}-percentiles", m)


def latency_order(metrics: Mapping[str, MetricStats], reasoned: bool = True) -> list[str]:
    """The metrics with values, as the printed table orders them (TTFT first, the
    driver's lags last); any it does not name after those, by name. The time to first
    answer only where a request ``reasoned`` (it is TTFT's otherwise)."""
    known = [m for m in LATENCY_ORDER if m in metrics]
    rest = sorted(m for m in metrics if m not in LATENCY_ORDER)
    hidden = () if reasoned else ANSWER_METRICS
    return [m for m in (*known, *rest) if metrics[m]["count"] and m not in hidden]


def _sweep_section(page: Page, folder: Path, result: CapacityResult) -> None:
    rows = [
        (
            r["load"],
            r["requests_per_s"],
            r["output_tokens_per_s"],
            r["goodput_per_s"],
            r["ttft_ms_p50"],
            r["ttft_ms_p95"],
            r["e2e_ms_p50"],
            r["e2e_ms_p99"],
            r["error_rate"],
            met(r["slo_met"]) if r.get("slo", "met") in ("met", "missed") else r["slo"],
        )
        for r in result["steps"]
    ]
    head = (
        result["kind"],
        "req/s",
        "tok/s",
        "goodput/s",
        "TTFT p50",
        "TTFT p95",
        "e2e p50",
        "e2e p99",
        "error rate",
        "SLOs",
    )
    page.add(table(head, rows))
    page.add(
        f"<p>{esc(best_load_text(result)).replace('highest', 'Highest', 1)}. "
        f"Knee (median e2e within {result['knee_tolerance']:.0%} of its lowest): "
        f"<b>{esc(knee_text(result))}</b>.</p>"
    )
    steps = sorted(p for p in folder.glob("step-*") if p.is_dir())
    firsts = [f for p in steps[:1] for f in (*p.glob("summary.json"), *p.glob("*/summary.json"))]
    limits = _limits(load_summary(firsts[0])) if firsts else {}
    page.plot(capacity_figure(result, limits=limits), "capacity", "latency against throughput")
    # A step's run is the step folder itself (older sweeps: one run folder inside it).
    hists = {
        p.name: merged_metric(
            sorted([*p.glob("histograms.hlog"), *p.glob("*/histograms.hlog")]), "ttft_ms"
        )
        for p in steps
    }
    page.plot(percentile_figure(hists, "ttft_ms"), "ttft-percentiles", "TTFT per step")


def _is_search(path: Path) -> bool:
    """A search's capacity.json (points) rather than a grid's (steps)."""
    try:
        return "search" in _load(path)
    except UsageError:
        return False  # load_capacity says what is wrong with it


def write_report(path: str | Path, out: str | Path | None = None) -> Path:
    """Write ``report.html`` for the run, sweep or comparison folder ``path``."""
    folder = Path(path)
    target = Path(out) if out else folder / "report.html"
    if (folder / "decision.json").exists():
        from loadtest.report.decision_html import decision_section

        title = f"Decision across load: {folder.name}"
        page = Page(folder, title)
        decision_section(page, load_decision(folder))
    elif (folder / "capacity.json").exists() and _is_search(folder / "capacity.json"):
        from loadtest.report.search_html import search_section

        title = f"Capacity search: {folder.name}"
        page = Page(folder, title)
        search_section(page, folder, load_search(folder / "capacity.json"))
    elif (folder / "capacity.json").exists():
        result = load_capacity(folder / "capacity.json")
        title = f"Capacity sweep: {folder.name}"
        page = Page(folder, title)
        _sweep_section(page, folder, result)
    elif (folder / "comparison.json").exists():
        c = _load(folder / "comparison.json")
        if "metrics" not in c:
            raise UsageError(f"{folder}: the comparison has no runs on one side (stopped early?)")
        title = f"Comparison: {folder.name}"
        page = Page(folder, title)
        comparison_section(page, folder, c)
    elif is_run_folder(folder):
        summary = summary_of(folder)  # a killed run's is rebuilt from its files
        title = f"Run {summary['run']['id']}"
        page = Page(folder, title)
        _run_section(page, folder, summary)
    else:
        raise UsageError(
            f"{folder}: no summary.json, requests.jsonl, capacity.json or comparison.json; "
            "give a run, sweep or ab folder"
        )
    write_atomic(target, page.html(title))
    return target
