"""A ``LiveView`` as Prometheus metric families (pure: no socket, no clock).

Names follow Prometheus' rules: base units (seconds), ``_total`` on counters, one name
per thing measured. A latency ``x_ms`` of loadtest is ``loadtest_x_seconds`` (its
corrected twin ``x_ms_corrected``: ``loadtest_x_corrected_seconds``) twice over:

- a histogram on log-spaced buckets from 1 ms, four to a doubling (19% apart; vLLM's
  TTFT buckets are up to 2.5x apart), for ``histogram_quantile`` and heatmaps;
- ``..._exact`` summaries: the HDR histograms' own percentiles, computed as the summary
  computes them, over the run (``window="run"``, equal to summary.json's at the end)
  and over the last 10 s (``window="10s"``).

Every latency series has the labels ``api`` (the scenario's: ``chat``, ``completions``,
``responses``) and ``category`` (``all``: the whole mix, so a sum over categories leaves
``all`` out); every series has the view's own labels (``side``, ``step``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version

import numpy as np
from hdrh.histogram import HdrHistogram
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    InfoMetricFamily,
    Metric,
)

from loadtest.config.feature_specs import FAULTS
from loadtest.live.view import LiveView, SeriesKey, Sparse, sparse_percentile
from loadtest.measure.hdr import PERCENTILES, bucket_arrays, metric_stats
from loadtest.model.record import CORRECTED, METRICS
from loadtest.model.verdict import FaultVerdict
from loadtest.report.summary import judge_run

__all__ = [
    "BUCKETS_S",
    "EXPORTED",
    "PREFIX",
    "cumulative_buckets",
    "families",
    "loadtest_version",
    "series_name",
]

PREFIX = "loadtest"

BUCKETS_S = tuple(round(0.001 * 2 ** (i / 4), 6) for i in range(4 * 18 + 1))
"""Upper bounds (s) of the histograms' buckets: 1 ms to 262 s, 2^(1/4) apart."""

EXPORTED = (*METRICS, *(f"{m}_corrected" for m in CORRECTED), "valid_call_ms")
"""The latencies exported, as loadtest names them (``model.record.METRICS``...)."""

_QUANTILES = tuple((str(q / 100), key) for key, q in PERCENTILES)
"""(the ``quantile`` label, the summary's key): 0.5 p50 ... 0.999 p999."""


def series_name(metric: str) -> str:
    """``ttft_ms`` -> ``loadtest_ttft_seconds``; ``e2e_ms_corrected`` ->
    ``loadtest_e2e_corrected_seconds``."""
    base = metric.removesuffix("_corrected").removesuffix("_ms")
    corrected = "_corrected" if metric.endswith("_corrected") else ""
    return f"{PREFIX}_{base}{corrected}_seconds"


_BOUNDS_US = np.array([b * 1e6 for b in BUCKETS_S])


def cumulative_buckets(h: HdrHistogram) -> np.ndarray:
    """How many of ``h``'s values are at most each of ``BUCKETS_S`` (a value counts once
    its HDR bucket's highest equivalent value is within the bound: 0.1% resolution)."""
    _, highest, counts = bucket_arrays(h)
    cum = np.cumsum(counts)
    at = np.searchsorted(highest, _BOUNDS_US, side="right")
    below: np.ndarray = np.where(at > 0, cum[np.maximum(at - 1, 0)], 0)
    return below


def loadtest_version() -> str:
    try:
        return version("loadtest")
    except PackageNotFoundError:  # a checkout run without an install
        return "unknown"


def families(view: LiveView, recent: Mapping[SeriesKey, Sparse]) -> Iterator[Metric]:
    """Every family of ``view``; ``recent``: each histogram's values of the last seconds
    (``RecentWindow.add``), for the ``window="10s"`` percentiles."""
    names = [k for k, _ in view.labels]
    values = [v for _, v in view.labels]
    yield from _info(view, names, values)
    yield from _latencies(view, recent, names, values)
    yield from _counts(view, names, values)
    yield from _verdicts(view, names, values)


def _info(view: LiveView, names: list[str], values: list[str]) -> Iterator[Metric]:
    info = InfoMetricFamily(f"{PREFIX}_run", "The run now shown", labels=names)
    info.add_metric(
        values,
        {
            "run_id": view.run_id,
            "scenario": view.scenario.name,
            "seed": str(view.scenario.seed),
            "endpoint": view.endpoint,
            "version": loadtest_version(),
        },
    )
    yield info
    phase = GaugeMetricFamily(
        f"{PREFIX}_run_phase", "1 for the phase the run is in", labels=[*names, "phase"]
    )
    for p in ("warm-up", "measuring", "ended"):
        phase.add_metric([*values, p], float(p == view.phase))
    yield phase
    yield _gauge(
        "run_elapsed_seconds",
        "Since the load started, warm-up included",
        names,
        values,
        view.elapsed_s,
    )
    yield _gauge("run_measured_seconds", "Seconds measured so far", names, values, view.measured_s)


def _gauge(name: str, doc: str, names: list[str], values: list[str], v: float) -> Metric:
    g = GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=names)
    g.add_metric(values, v)
    return g


def _latencies(
    view: LiveView, recent: Mapping[SeriesKey, Sparse], names: list[str], values: list[str]
) -> Iterator[Metric]:
    sets = view.sets()
    for metric in EXPORTED:
        name = series_name(metric)
        hist = HistogramMetricFamily(
            name,
            f"{metric} of measured requests (HDR counts on log buckets)",
            labels=[*names, "api", "category"],
        )
        exact = Metric(
            f"{name}_exact", f"{metric}: the HDR histogram's exact percentiles", "summary"
        )
        for category, ms in sets.items():
            h = ms.hists[metric]
            n = h.get_total_count()
            if not n:
                continue
            labels = [*values, view.scenario.api, category]
            stats = metric_stats(h, ms.sums[metric])
            total_s = ms.sums[metric] / 1e6
            highest, counts = recent.get((category, metric), (np.empty(0), np.empty(0)))
            below = cumulative_buckets(h)
            buckets = [(repr(b), float(c)) for b, c in zip(BUCKETS_S, below, strict=True)]
            hist.add_metric(labels, [*buckets, ("+Inf", float(n))], total_s)
            keys = dict(zip([*names, "api", "category"], labels, strict=True))
            # OpenMetrics wants each labelset's samples together: the run's, then the 10 s.
            run = {**keys, "window": "run"}
            for q, key in _QUANTILES:
                v = stats.get(key)
                p = round(float(v) / 1e3, 9) if isinstance(v, int | float) else float("nan")
                exact.add_sample(f"{name}_exact", {**run, "quantile": q}, p)
            exact.add_sample(f"{name}_exact_count", run, float(n))
            exact.add_sample(f"{name}_exact_sum", run, total_s)
            recent_keys = {**keys, "window": "10s"}
            for q, _ in _QUANTILES:
                w = sparse_percentile((highest, counts), float(q) * 100)
                p = w / 1e6 if w is not None else float("nan")
                exact.add_sample(f"{name}_exact", {**recent_keys, "quantile": q}, p)
            exact.add_sample(f"{name}_exact_count", recent_keys, float(np.sum(counts)))
        if hist.samples:
            yield hist
            yield exact


def _counts(view: LiveView, names: list[str], values: list[str]) -> Iterator[Metric]:
    m = view.metrics
    requests = CounterMetricFamily(
        f"{PREFIX}_requests",
        "Requests accounted for, warm-up included, by outcome",
        labels=[*names, "outcome"],
    )
    for outcome in ("ok", "failed", "cancelled"):
        requests.add_metric([*values, outcome], float(m.outcomes.get(outcome, 0)))
    yield requests
    errors = CounterMetricFamily(
        f"{PREFIX}_request_errors",
        "Failed requests by error class",
        labels=[*names, "error_class"],
    )
    for cls, n in sorted(m.errors.items()):
        errors.add_metric([*values, cls], float(n))
    yield errors
    for name, doc, v in (
        ("warmup_requests", "Requests sent during the warm-up", m.warmup_requests),
        ("measured_ok_requests", "Measured requests that completed", m.measured_ok),
        ("output_tokens", "Output tokens of measured completed requests", m.output_tokens),
        ("goodput_requests", "Measured requests within every per-request SLO", m.goodput),
    ):
        c = CounterMetricFamily(f"{PREFIX}_{name}", doc, labels=names)
        c.add_metric(values, float(v))
        yield c
    calls = CounterMetricFamily(
        f"{PREFIX}_tool_calls",
        "Responses with tool calls, by whether the calls were valid",
        labels=[*names, "valid"],
    )
    with_calls, valid = m.tool_stats.get("responses_with_calls", 0), m.tool_stats.get("valid", 0)
    calls.add_metric([*values, "true"], float(valid))
    calls.add_metric([*values, "false"], float(with_calls - valid))
    yield calls
    yield _gauge(
        "in_flight_requests",
        "Requests sent and not yet ended",
        names,
        values,
        float(view.in_flight),
    )


def _verdicts(view: LiveView, names: list[str], values: list[str]) -> Iterator[Metric]:
    """The SLOs met so far (the summary's own at the end), the driver's health, and the
    fault timeline with each window's verdict once the run has judged it."""
    if view.summary is not None and "driver" in view.summary:
        slo, driver = view.summary["slo"], view.summary["driver"]  # the run's own verdicts
    else:
        driver, slo = judge_run(view.metrics, view.scenario.slo, view.measured_s)
    met = GaugeMetricFamily(
        f"{PREFIX}_slo_met",
        "1 met, 0 missed, per SLO (so far while the run goes)",
        labels=[*names, "slo", "verdict"],
    )
    limit = GaugeMetricFamily(
        f"{PREFIX}_slo_limit",
        "Each SLO's limit, in its own unit (ms, share)",
        labels=[*names, "slo"],
    )
    for check in slo["checks"]:
        verdict = check.get("verdict", "met" if check["met"] else "missed")
        met.add_metric([*values, check["slo"], verdict], float(check["met"]))
        limit.add_metric([*values, check["slo"]], float(check["limit"]))
    yield met
    yield limit
    yield _gauge(
        "driver_busy",
        "1 when loadtest itself fell behind its schedule",
        names,
        values,
        float(driver["busy"]),
    )
    events = FAULTS.of(view.scenario).events
    if not events:
        return
    state = GaugeMetricFamily(
        f"{PREFIX}_fault_window",
        "1 for each fault window's state now",
        labels=[*names, "window", "kind", "state"],
    )
    start = GaugeMetricFamily(
        f"{PREFIX}_fault_window_start_seconds",
        "When each window starts, on the run's clock",
        labels=[*names, "window", "kind"],
    )
    judged = {(f["name"], f["kind"]): f["verdict"] for f in _judged(view)}
    final = "true" if view.summary is not None else "false"
    verdicts = GaugeMetricFamily(
        f"{PREFIX}_fault_verdict",
        "1 for each window's verdict: so far (final=false) or the run's (final=true)",
        labels=[*names, "window", "kind", "verdict", "final"],
    )
    for ev in events:
        now = view.elapsed_s
        at = "pending" if now < ev.at_s else "active" if now < ev.end_s else "done"
        for s in ("pending", "active", "done"):
            state.add_metric([*values, ev.label, ev.kind, s], float(s == at))
        start.add_metric([*values, ev.label, ev.kind], ev.at_s)
        if (ev.label, ev.kind) in judged:
            said = judged[ev.label, ev.kind]
            verdicts.add_metric([*values, ev.label, ev.kind, said, final], 1.0)
    yield state
    yield start
    yield verdicts


def _judged(view: LiveView) -> Sequence[FaultVerdict]:
    return view.faults if view.summary is None else view.summary.get("faults", [])
