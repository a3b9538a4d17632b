"""``loadtest report``: one self-contained HTML file for a run, a sweep or a comparison.

Tables come from the folder's JSON (summary.json, capacity.json, comparison.json or an
ab sweep's decision.json),
plots from its histograms; every plot is also saved as PNG and SVG under ``plots/`` and
embedded in the page as a data URI, so the page has no outside reference and can be
attached to a capacity review as it is.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
from hdrh.histogram import HdrHistogram

from loadtest.errors import UsageError
from loadtest.measure.recorders import new_histogram
from loadtest.model.atomic import write_atomic
from loadtest.model.io import load_capacity, load_decision, load_summary
from loadtest.model.json import JsonObject
from loadtest.model.summary import MetricStats, StatKey, Summary
from loadtest.model.sweep import CapacityResult, best_load_text, knee_text
from loadtest.model.verdict import STATE_OF, FaultVerdict, SloCheck
from loadtest.report.evidence import rebuilt_note
from loadtest.report.exit_reasons import too_few
from loadtest.report.hlog import read_hlog, read_intervals
from loadtest.report.plots import (
    capacity_figure,
    percentile_figure,
    save_figure,
    timeline_figure,
)
from loadtest.report.rebuild import is_run_folder, summary_of
from loadtest.report.run_notes import corrected_counts_note
from loadtest.report.table import LATENCY_ORDER

__all__ = ["latency_order", "write_report"]

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;
text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.bad{color:#b00;font-weight:bold}.good{color:#070}img{max-width:100%;margin:1em 0}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}code{background:#f3f3f3}
"""


def _esc(v: Any) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.4g}"
    return html.escape(str(v))


def _fault_row(f: FaultVerdict) -> tuple[object, ...]:
    """A fault window's row; no figures for a window nothing was tried in (the few that
    fell in were chance, not its evidence)."""
    figures: tuple[float | None, ...] = (None,) * 4
    if STATE_OF[f["verdict"]] != "not_exercised":
        b, d, a = (f[p]["ttft_p95_ms"] for p in ("before", "during", "after"))
        figures = (b, d, a, f["recovery_s"])
    where = (f["name"] or f["kind"], f["kind"], f["start_s"], f["end_s"])
    return (*where, *figures, f["verdict"], f["reason"])


def _table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    th = "".join(f"<th>{_esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def _met(flag: bool) -> str:
    return '<span class="good">met</span>' if flag else '<span class="bad">MISSED</span>'


def _slo_mark(check: SloCheck) -> str:
    if check.get("verdict") == "inconclusive":
        return f'<span class="bad">CANNOT TELL</span> ({_esc(too_few(check))})'
    return _met(check["met"])


class _Page:
    def __init__(self, folder: Path, title: str) -> None:
        self.folder = folder
        self.parts = [f"<h1>{_esc(title)}</h1>"]

    def add(self, text: str) -> None:
        self.parts.append(text)

    def plot(self, fig: Any, name: str, alt: str) -> None:
        png, _ = save_figure(fig, self.folder / "plots" / name)
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        self.parts.append(f'<img alt="{_esc(alt)}" src="data:image/png;base64,{data}">')

    def html(self, title: str) -> str:
        return (
            f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{_esc(title)}</title><style>{_CSS}</style></head><body>"
            + "\n".join(self.parts)
            + "</body></html>"
        )


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


def _run_section(page: _Page, folder: Path, summary: Summary) -> None:
    run, req = summary["run"], summary["requests"]
    note = rebuilt_note(summary)
    if note is not None:  # first: every figure below stands on it
        page.add(f'<p class="bad">{_esc(note)}</p>')
    page.add(
        _table(
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
    rows = [(m, *(metrics[m].get(k) for k in _STATS)) for m in latency_order(metrics)]
    page.add("<h2>Latency (ms)</h2>" + _table(("metric", *_STATS), rows))
    note = corrected_counts_note(metrics)
    if note:
        page.add(f"<p>{_esc(note)}</p>")
    slo = summary["slo"]
    if slo["checks"]:
        checks = [(c["slo"], c["limit"], c["value"], _slo_mark(c)) for c in slo["checks"]]
        body = _table(("objective", "limit", "value", "met"), checks)
        page.add("<h2>SLOs</h2>" + _unescape_marks(body))
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
        page.add("<h2>Fault windows</h2>" + _table(head, frows))
    hlog = folder / "histograms.hlog"
    intervals = read_intervals(hlog) if hlog.exists() else {}
    if not intervals:  # a damaged folder: said on the page, not left out without a word
        page.add(f"<p>{_esc(str(hlog))}: missing or empty, so no plots over time.</p>")
    else:
        page.plot(timeline_figure(intervals, faults), "timeline", "timeline")
        totals = read_hlog(hlog)
        for m in ("ttft_ms", "e2e_ms"):
            if m in totals and totals[m].get_total_count():
                fig = percentile_figure({run["id"]: totals[m]}, m, _limits(summary))
                page.plot(fig, f"{m}-percentiles", m)


def latency_order(metrics: Mapping[str, MetricStats]) -> list[str]:
    """The metrics with values, as the printed table orders them (TTFT first, the
    driver's lags last); any it does not name after those, by name."""
    known = [m for m in LATENCY_ORDER if m in metrics]
    rest = sorted(m for m in metrics if m not in LATENCY_ORDER)
    return [m for m in (*known, *rest) if metrics[m]["count"]]


def _unescape_marks(text: str) -> str:
    # The met/MISSED cells are our own markup, escaped by _table; restore just those.
    for mark in ('<span class="good">met</span>', '<span class="bad">MISSED</span>'):
        text = text.replace(html.escape(mark), mark)
    return text


def _merged(hlogs: Sequence[Path], metric: str) -> HdrHistogram:
    total = new_histogram()
    for path in hlogs:
        h = read_hlog(path).get(metric)
        if h is not None:
            total.add(h)
    return total


def _sweep_section(page: _Page, folder: Path, result: CapacityResult) -> None:
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
            _met(r["slo_met"]) if r.get("slo", "met") in ("met", "missed") else r["slo"],
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
    page.add(_unescape_marks(_table(head, rows)))
    page.add(
        f"<p>{_esc(best_load_text(result)).replace('highest', 'Highest', 1)}. "
        f"Knee (median e2e within {result['knee_tolerance']:.0%} of its lowest): "
        f"<b>{_esc(knee_text(result))}</b>.</p>"
    )
    steps = sorted(p for p in folder.glob("step-*") if p.is_dir())
    firsts = [f for p in steps[:1] for f in (*p.glob("summary.json"), *p.glob("*/summary.json"))]
    limits = _limits(load_summary(firsts[0])) if firsts else {}
    page.plot(capacity_figure(result, limits=limits), "capacity", "latency against throughput")
    # A step's run is the step folder itself (older sweeps: one run folder inside it).
    hists = {
        p.name: _merged(
            sorted([*p.glob("histograms.hlog"), *p.glob("*/histograms.hlog")]), "ttft_ms"
        )
        for p in steps
    }
    page.plot(percentile_figure(hists, "ttft_ms"), "ttft-percentiles", "TTFT per step")


def _comparison_section(page: _Page, folder: Path, raw: JsonObject) -> None:
    from typing import cast

    from loadtest.measure.stats import format_p
    from loadtest.model.comparison import Comparison
    from loadtest.report.compare_figures import SIDE_FIELDS
    from loadtest.report.compare_render import acceptance_rows, cost_rows, line_verdict

    c = cast(Comparison, raw)  # comparison.json as compare_runs wrote it
    a, b = c["a"], c["b"]
    for f in c.get("findings", []):
        page.add(f"<p><b>{'STOP' if f['blocking'] else 'NOTE'}</b>: {_esc(f['message'])}</p>")
    page.add(
        f"<p>A (baseline): {_esc(a['endpoint'])}, runs {_esc(', '.join(a['runs']))}<br>"
        f"B (candidate): {_esc(b['endpoint'])}, runs {_esc(', '.join(b['runs']))}</p>"
    )
    sa: Mapping[str, object] = a  # looked up by field name below
    sb: Mapping[str, object] = b
    rows = [
        (k, sa.get(k), sb.get(k))
        for k in SIDE_FIELDS
        if sa.get(k) is not None or sb.get(k) is not None
    ]
    page.add(_table(("figure", "A", "B"), rows))
    costs = cost_rows(c)
    if costs:
        energy = "".join(
            f"<br>energy {n}: {_esc(dc['energy'])}"
            for n, side in (("A", a), ("B", b))
            if (dc := side.get("deployment_cost")) is not None
        )
        page.add(
            "<h2>Deployment cost</h2><p>Measured by ab on the servers it started: cold start "
            "at each start, resident memory sampled through each run (steady = median), "
            f"energy from the machine's counters.{energy}</p>" + _table(("figure", "A", "B"), costs)
        )
    acc = acceptance_rows(c)
    if acc:
        page.add(
            "<h2>Speculative acceptance per category</h2><p>Engine: accepted / drafted, and "
            "accepted per step = accepted / (output - accepted) (every verify step emits the "
            "target's token plus the drafts it accepted). loadtest: tokens per step - 1, from "
            "the bursts of chunks on the stream. Agree: tokens per step within "
            f"{acc[0][-2]} of each other.</p>"
            + _table(
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
        + _table(
            ("metric", "pct", "A", "B", "B-A", "95% CI", "p (Holm)", "verdict", "rank test p"),
            srows,
        )
    )
    eq = c.get("equivalence")
    if eq:
        page.add(
            f"<h2>Output equivalence</h2><p>{eq['matching']} of {eq['prompts_compared']} "
            f"prompts answered identically ({eq['match_rate']:.1%}); "
            f"{_esc(eq.get('attributed', '–'))} diverge only on B (the baseline answered "
            "them alike every time).</p>"
        )
        if eq["divergent"]:
            page.add(
                _table(
                    ("prompt", "A", "B"),
                    [(d["prompt_id"], d["a"], d["b"]) for d in eq["divergent"]],
                )
            )
    sides = {s: sorted((folder / s).glob("*/histograms.hlog")) for s in ("baseline", "candidate")}
    if all(sides.values()):
        for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
            hists = {s: _merged(paths, m) for s, paths in sides.items()}
            if not any(h.get_total_count() for h in hists.values()):
                no_tpot = "(answers with tool calls have no TPOT)"
                page.add(f"<p>{m}: no values on either side {no_tpot}; no plot.</p>")
                continue
            page.plot(percentile_figure(hists, m), f"{m}-percentiles", m)


def write_report(path: str | Path, out: str | Path | None = None) -> Path:
    """Write ``report.html`` for the run, sweep or comparison folder ``path``."""
    folder = Path(path)
    target = Path(out) if out else folder / "report.html"
    if (folder / "decision.json").exists():
        from loadtest.report.decision_html import decision_section

        title = f"Decision across load: {folder.name}"
        page = _Page(folder, title)
        decision_section(page, load_decision(folder))
    elif (folder / "capacity.json").exists():
        result = load_capacity(folder / "capacity.json")
        title = f"Capacity sweep: {folder.name}"
        page = _Page(folder, title)
        _sweep_section(page, folder, result)
    elif (folder / "comparison.json").exists():
        c = _load(folder / "comparison.json")
        if "metrics" not in c:
            raise UsageError(f"{folder}: the comparison has no runs on one side (stopped early?)")
        title = f"Comparison: {folder.name}"
        page = _Page(folder, title)
        _comparison_section(page, folder, c)
    elif is_run_folder(folder):
        summary = summary_of(folder)  # a killed run's is rebuilt from its files
        title = f"Run {summary['run']['id']}"
        page = _Page(folder, title)
        _run_section(page, folder, summary)
    else:
        raise UsageError(
            f"{folder}: no summary.json, requests.jsonl, capacity.json or comparison.json; "
            "give a run, sweep or ab folder"
        )
    write_atomic(target, page.html(title))
    return target
