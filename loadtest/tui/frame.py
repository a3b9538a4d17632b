"""What the dashboard shows, as plain data and text: no Textual, no sockets.

A ``Frame`` is one frozen picture of a run (live or replayed); the sources build frames
and the app only lays them out, so everything on screen is tested without a terminal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from hdrh.histogram import HdrHistogram

from loadtest.features.faults.live_windows import FaultRow, render_timeline
from loadtest.measure.recorders import bucket_arrays
from loadtest.model.json import JsonObject
from loadtest.model.verdict import DriverHealth, SloBlock
from loadtest.report.table import slo_line

__all__ = [
    "DASH_METRICS",
    "Frame",
    "RunVerdicts",
    "latency_cell",
    "percentile_rows",
    "progress",
    "render_counts",
    "render_faults",
    "render_header",
    "render_server",
    "render_verdicts",
    "series_labels",
    "server_title",
]

DASH_METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "tool_call_ms", "client_lag_ms")
"""The metrics of the percentile table, in the order ``m`` cycles through them."""

PercentileRow = tuple[str, int, float | None, float | None, float | None, float | None]


@dataclass(frozen=True, slots=True)
class RunVerdicts:
    """The SLO checks and the driver's health, as ``report.summary.judge_run`` says."""

    slo: SloBlock
    driver: DriverHealth | None
    """None in summaries written before the driver was judged."""
    provisional: bool = False


@dataclass(frozen=True, slots=True)
class Frame:
    """One picture of the run for the dashboard."""

    scenario: str
    endpoint: str
    model: str
    elapsed_s: float
    phase: str
    progress: float | None = None
    eta_s: float | None = None
    sent: int = 0
    ok: int = 0
    failed: int = 0
    cancelled: int = 0
    in_flight: int = 0
    warmup: int = 0
    """Requests sent in the warm-up (among ``sent``; the percentiles leave them out)."""
    errors: Mapping[str, int] = field(default_factory=dict)
    category: str = "all"
    categories: tuple[str, ...] = ("all",)
    metric: str = "ttft_ms"
    percentiles: tuple[PercentileRow, ...] = ()
    buckets: tuple[tuple[float, float, int], ...] = ()
    req_rate: tuple[float, ...] = ()
    tok_rate: tuple[float, ...] = ()
    ttft_p95: tuple[float, ...] = ()
    faults: tuple[FaultRow, ...] = ()
    server: JsonObject | None = None
    panels: tuple[str, ...] = ()
    """The summary blocks' panels (``SummaryBlock.panel``), in the registry's order."""
    verdicts: RunVerdicts | None = None
    interval_s: float | None = None
    """The length of the interval the series' last values are of (the run rolls one a
    second; a replay's last may be shorter): their labels say it, beside the run's own
    rate (``run_rate``), which is over the whole run."""
    run_rate: tuple[float, float] | None = None
    """A finished run's requests and output tokens per measured second: its last frame
    showed the last interval's rate (32.8 req/s for a run at 20)."""
    fault_note: str | None = None
    """What stands for the fault windows where none was judged (a rebuilt run)."""
    notice: str | None = None
    """What the reader must know of where the figures come from: a rebuilt run's note
    (it was printed before the dashboard took the screen, and seen only after quitting)."""


def percentile_rows(hists: Mapping[str, HdrHistogram]) -> tuple[PercentileRow, ...]:
    """(metric, count, p50, p90, p99, max) in ms for each dashboard metric.

    Percentiles as hdrh reports them: the highest value equivalent to the bucket that
    holds the ``q``-th share of the count.
    """
    rows: list[PercentileRow] = []
    for m in DASH_METRICS:
        h = hists.get(m)
        n = h.get_total_count() if h is not None else 0
        if h is None or not n:
            rows.append((m, 0, None, None, None, None))
            continue
        _, highest, counts = bucket_arrays(h)
        cum = np.cumsum(counts)
        total = int(cum[-1])
        p = []
        for q in (50, 90, 99):
            at = max(1, int(q / 100 * total + 0.5))
            p.append(float(highest[int(np.searchsorted(cum, at))]) / 1e3)
        rows.append((m, total, p[0], p[1], p[2], float(highest[-1]) / 1e3))
    return tuple(rows)


def progress(
    elapsed_s: float,
    warmup_s: float,
    duration_s: float | None,
    requests: int | None,
    measured: int,
) -> tuple[float | None, float | None]:
    """(fraction done, seconds left) toward the run's duration or request count."""
    if duration_s:
        total = warmup_s + duration_s
        frac = min(1.0, max(0.0, elapsed_s / total))
        return frac, max(0.0, total - elapsed_s)
    if requests:
        frac = min(1.0, measured / requests)
        measuring_s = elapsed_s - warmup_s
        if measured and measuring_s > 0:
            return frac, max(0.0, (requests - measured) * measuring_s / measured)
        return frac, None
    return None, None


def latency_cell(v: float | None) -> str:
    """A latency in at most 6 characters, to 3 significant digits or more: never
    ``0.00`` for a value above zero (a 4 µs gap is 0.004), ``0`` only for zero."""
    if v is None:
        return "-"
    if v == 0:
        return "0"
    if v < 0.1:
        return f"{v:.3f}"
    return f"{v:.2f}" if v < 100 else f"{v:.1f}" if v < 1000 else f"{v:.0f}"


def _dur(s: float | None) -> str:
    if s is None:
        return "?"
    m, sec = divmod(round(s), 60)
    return f"{m}:{sec:02d}"


def render_header(f: Frame, width: int = 40, columns: int | None = None) -> str:
    """Scenario, endpoint, model, phase, elapsed, and a progress bar with ETA.

    ``width`` is the bar's; with ``columns`` (the header's width) the bar takes what the
    second line leaves, so it never wraps onto a third.
    """
    line = f"[b]{f.scenario}[/b] -> {f.endpoint}  model {f.model}"
    status = f"{f.phase}  {_dur(f.elapsed_s)} elapsed"
    bar = ""
    if f.progress is not None:
        tail = f"] {f.progress:4.0%}  ETA {_dur(f.eta_s)}"
        if columns is not None:
            width = max(5, columns - len(status) - len(tail) - 3)
        filled = round(f.progress * width)
        bar = f"  [{'█' * filled}{'·' * (width - filled)}{tail}"
    return f"{line}\n{status}{bar}"


def render_counts(f: Frame, width: int | None = None) -> str:
    """Outcome counters and failures by class; in lines of ``width`` or fewer
    characters where they fit (an 80-column terminal leaves the panel some 24)."""
    errors = "  ".join(f"{k} {v}" for k, v in sorted(f.errors.items())) or "none"
    rate = f.req_rate[-1] if f.req_rate else 0.0
    tok = f.tok_rate[-1] if f.tok_rate else 0.0
    over = ""
    if f.run_rate is not None:
        (rate, tok), over = f.run_rate, " over the run"
    # The warm-up's requests are counted here and not in the percentiles: "sent 236 ok
    # 236" stood beside counts of 197 with no word of the 39.
    warm = f"  warm-up {f.warmup}" if f.warmup else ""
    if width is not None and width < 32:
        # "over the run" on a line of its own: wrapped, its "the run" fell into the row
        # beside the next metric of the table.
        return (
            f"sent {f.sent}  in flight {f.in_flight}\n"
            f"ok {f.ok}  failed {f.failed}\n"
            f"cancelled {f.cancelled}{warm}\n"
            f"failed by class: {errors}\n"
            f"{rate:.1f} req/s  {tok:.0f} tok/s" + (f"\n({over.strip()})" if over else "")
        )
    return (
        f"sent {f.sent}   in flight {f.in_flight}{warm}\n"
        f"ok {f.ok}   failed {f.failed}   cancelled {f.cancelled}\n"
        f"failed by class: {errors}\n"
        f"{rate:.1f} req/s   {tok:.0f} output tok/s{over}"
    )


def render_faults(f: Frame) -> str:
    """The fault timeline: each window, its state and its verdict when known."""
    return render_timeline(f.faults, f.fault_note)


def render_verdicts(f: Frame) -> str:
    """The SLO checks, goodput and whether the driver kept up, as the summary says them."""
    v = f.verdicts
    if v is None:
        return "SLOs and driver: not judged yet"
    so_far = " (so far)" if v.provisional else ""
    lines = []
    # First: a busy driver qualifies every figure, and a short panel keeps its top lines.
    if v.driver is not None:
        lines.append(f"driver: {'BUSY' if v.driver['busy'] else 'kept up'}{so_far}")
    for c in v.slo["checks"]:
        lines.append(slo_line(c) + so_far)
    good = v.slo.get("goodput")
    if good:
        lines.append(
            f"goodput: {good['requests']} requests ({good['share']:.0%} of measured ok){so_far}"
        )
    if not v.slo["checks"] and not good:
        lines.append("no SLOs set")
    return "\n".join(lines)


def render_server(f: Frame, width: int | None = None) -> str:
    """Scraped server metrics: acceptance, running and waiting requests, KV use; in
    lines of ``width`` or fewer characters, a figure never cut in two."""
    if not f.server:
        return "no server metrics scraped"
    s = f.server
    parts = []
    for key, label, unit in _SERVER_FIGURES:
        v = s.get(key)
        if isinstance(v, int | float) and not isinstance(v, bool):
            text = f"{v:.1%}" if unit == "%" else f"{v:.3g}{unit}" if v < 1000 else f"{v:.0f}{unit}"
            parts.append(f"{label} {text}")
    lines: list[str] = []
    for part in parts:
        if lines and (width is None or len(lines[-1]) + 2 + len(part) <= width):
            lines[-1] += "  " + part
        else:
            lines.append(part)
    return "\n".join(lines) or "no server metrics scraped"


_SERVER_FIGURES = (
    ("acceptance_rate", "acceptance", "%"),
    ("running", "running", ""),
    ("waiting", "waiting", ""),
    ("kv_cache_usage", "KV cache", "%"),
    ("target_rss_mib", "RSS", " MiB"),
    ("gpu_power_w", "GPU", " W"),
)
"""The server panel's figures: the summary's key, the label, and the unit (acceptance
a share, as the printed summary's ``acceptance 48.5%``)."""


def server_title(f: Frame) -> str:
    """The server panel's title: what its figures are of. Acceptance is over the last
    two scrapes, the gauges are the last one's: not the run's, which the printed summary
    gives (a replay's last frame read ``acceptance 0.444`` beside a run's 49.4%)."""
    span = f.server.get("span_s") if f.server else None
    return f"server, last {_secs(span)} s" if isinstance(span, float) else "server"


def series_labels(f: Frame) -> tuple[str, str, str]:
    """The series' labels with their last values, each at most ``layout.SPARK_LABEL``
    characters (``output tokens/s 1308`` lost its figure at 80 columns)."""
    req = f.req_rate[-1] if f.req_rate else 0.0
    tok = f.tok_rate[-1] if f.tok_rate else 0.0
    ttft = f.ttft_p95[-1] if f.ttft_p95 else 0.0
    return (
        f"requests/s {_figure(req)}",
        f"output tokens/s {_figure(tok, 0)}",
        f"TTFT p95 (ms) {_figure(ttft)}",
    )


def series_title(f: Frame) -> str:
    """The series panel's title: which interval the figures in its labels are of."""
    if f.interval_s is None:
        return "per second"
    return f"figures: last {_secs(f.interval_s)} s"


def _figure(v: float, decimals: int = 1) -> str:
    """``v`` in at most six characters."""
    if v < 1000 and decimals:
        return f"{v:.{decimals}f}"
    if v < 999_999.5:
        return f"{v:.0f}"
    return f"{v / 1e6:.1f}M"


def _secs(s: float) -> str:
    """Seconds to a tenth, without a trailing ``.0`` (``1``, ``0.9``)."""
    return f"{s:.1f}".removesuffix(".0")


def series(values: Sequence[float], n: int = 120) -> tuple[float, ...]:
    """The last ``n`` values (a sparkline needs at least one)."""
    return tuple(values[-n:]) or (0.0,)
