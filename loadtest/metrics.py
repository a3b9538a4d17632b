"""HDR recorders for every latency metric, raw and corrected, with live snapshots.

Values are recorded in microseconds (1 µs .. 1 h, 3 significant digits). Each metric is
recorded into a per-interval histogram that is rolled once a second (for the ``.hlog``)
and added into the run total at the roll, so the hot path records each value once.

Coordinated omission: in open loop the corrected variants are measured from the
*intended* send time. In closed loop there is no intended time beyond "when the session
was free", so the corrected variants use HdrHistogram's expected-interval correction with
the running mean end-to-end latency as the expected interval between a session's sends.
"""

from __future__ import annotations

import ctypes
import itertools
import sys
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from hdrh.histogram import HdrHistogram

from loadtest.record import RequestRecord
from loadtest.slo import meets
from loadtest.timings import ServerTimings

__all__ = [
    "AGENT_METRICS",
    "CORRECTED",
    "METRICS",
    "MetricSet",
    "Metrics",
    "Snapshot",
    "bucket_arrays",
    "fast_percentile",
    "new_histogram",
    "record_many",
]

METRICS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "tool_call_ms", "dispatch_lag_ms")
CORRECTED = ("ttft_ms", "e2e_ms", "tool_call_ms")
AGENT_METRICS = ("valid_call_ms", "task_ms", "task_steps", "task_retries")
"""Recorded by agent sessions only (``loadtest.agent``): per step and per task."""
"""Metrics measured from the send time, which therefore have a ``*_corrected`` twin."""

_LOWEST, _HIGHEST, _DIGITS = 1, 3_600_000_000, 3


def new_histogram() -> HdrHistogram:
    """A histogram of microseconds from 1 µs to 1 h at 3 significant digits."""
    return HdrHistogram(_LOWEST, _HIGHEST, _DIGITS)


def bucket_arrays(hist: HdrHistogram) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(lowest value, highest equivalent value, count) of every non-empty bucket, in µs.

    hdrh walks its counts in pure Python (a percentile or an iteration costs tens of ms
    on a full histogram); reading the counts array with numpy costs well under 1 ms, so
    drawing stays cheap beside the load. The arithmetic is hdrh's ``get_value_from_index``.
    """
    counts = np.ctypeslib.as_array(hist.counts)[: hist.counts_len]
    idx = np.flatnonzero(counts)
    half_mag = hist.sub_bucket_half_count_magnitude
    half = hist.sub_bucket_half_count
    bucket = (idx >> half_mag) - 1
    sub = (idx & (half - 1)) + half
    low_bucket = bucket < 0
    sub = np.where(low_bucket, sub - half, sub)
    bucket = np.where(low_bucket, 0, bucket)
    shift = bucket + hist.unit_magnitude
    lowest = sub.astype(np.int64) << shift
    highest = lowest + (np.int64(1) << shift) - 1
    return lowest, highest, counts[idx].astype(np.int64)


def fast_percentile(hist: HdrHistogram, q: float) -> int:
    """``hist.get_value_at_percentile(q)`` (same value) without hdrh's Python walk.

    hdrh walks its counts array in Python, which costs milliseconds on a full histogram;
    a stall like that once a second in the event loop shows up in the latency it
    measures. Returns 0 for an empty histogram.
    """
    _, highest, counts = bucket_arrays(hist)
    if not len(counts):
        return 0
    cum = np.cumsum(counts)
    at = max(1, int(q / 100 * int(cum[-1]) + 0.5))
    return int(highest[min(int(np.searchsorted(cum, at)), len(highest) - 1)])


_BATCH_MIN = 48


def record_many(hist: HdrHistogram, values: Sequence[int]) -> int:
    """Record many non-negative integer values; returns how many were out of range.

    ``record_value`` costs ~1.6 µs in pure Python, which for a 1,000-token response is
    1.6 ms of event-loop time in one block. For long batches the counts-array indices are
    computed with numpy (the same arithmetic as ``hdrh``'s ``_counts_index_for``) and
    added per distinct bucket; the result is identical to recording one by one.
    """
    if len(values) < _BATCH_MIN:
        rec = hist.record_value
        return sum(1 for v in values if rec(v) is False)
    v = np.asarray(values, dtype=np.int64)
    v = v[v >= 0]
    _, exp = np.frexp((v | hist.sub_bucket_mask).astype(np.float64))
    bucket = exp.astype(np.int64) - hist.unit_magnitude - (hist.sub_bucket_half_count_magnitude + 1)
    sub = v >> (bucket + hist.unit_magnitude)
    idx = ((bucket + 1) << hist.sub_bucket_half_count_magnitude) + sub - hist.sub_bucket_half_count
    # The same bound as record_value: what fits in the counts array.
    fits = idx < hist.counts_len
    bad = len(values) - int(np.count_nonzero(fits))
    v, idx = v[fits], idx[fits]
    if v.size == 0:
        return bad
    counts = np.bincount(idx)
    nonzero = np.flatnonzero(counts)
    target = hist.counts
    for i, c in zip(nonzero.tolist(), counts[nonzero].tolist(), strict=True):
        target[i] += c
    hist.total_count += int(v.size)
    hist.min_value = min(hist.min_value, int(v.min()))
    hist.max_value = max(hist.max_value, int(v.max()))
    return bad


class MetricSet:
    """One histogram per metric name (``ttft_ms``, ``ttft_ms_corrected``, ...)."""

    NAMES = (
        METRICS + tuple(f"{m}_corrected" for m in CORRECTED) + ("tokens_per_chunk",) + AGENT_METRICS
    )

    def __init__(self) -> None:
        self.hists = {name: new_histogram() for name in self.NAMES}
        self.sums: dict[str, float] = dict.fromkeys(self.NAMES, 0.0)
        self.out_of_range = 0

    def record(self, name: str, value_us: float, expected_interval_us: float = 0.0) -> None:
        """Record one value; with an expected interval, HdrHistogram-corrected."""
        v = int(value_us)
        h = self.hists[name]
        ok = (
            h.record_corrected_value(v, int(expected_interval_us))
            if expected_interval_us >= 1
            else h.record_value(v)
        )
        if ok is False:
            self.out_of_range += 1
        else:
            self.sums[name] += value_us

    def clear(self) -> None:
        """Empty every histogram (memset: hdrh's own ``reset`` loops in Python)."""
        for name, h in self.hists.items():
            if h.get_total_count():
                ctypes.memset(h.counts, 0, ctypes.sizeof(h.counts))
                h.total_count = 0
                h.min_value = sys.maxsize
                h.max_value = 0
            self.sums[name] = 0.0
        self.out_of_range = 0

    def add(self, other: MetricSet) -> None:
        """Merge ``other`` into this set, losslessly."""
        for name in self.NAMES:
            if other.hists[name].get_total_count():
                self.hists[name].add(other.hists[name])
            self.sums[name] += other.sums[name]
        self.out_of_range += other.out_of_range


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A read-only view of the run for the TUI and progress lines.

    Percentiles are in milliseconds over the whole measured part of the run; rates are
    over the last completed interval.
    """

    elapsed_s: float
    sent: int
    ok: int
    failed: int
    cancelled: int
    in_flight: int
    warmup: bool
    requests_per_s: float
    output_tokens_per_s: float
    ttft_p50_ms: float
    ttft_p99_ms: float
    tpot_p50_ms: float
    e2e_p50_ms: float
    e2e_p99_ms: float
    dispatch_lag_p99_ms: float
    errors: dict[str, int] = field(default_factory=dict)
    rate_history: tuple[float, ...] = ()


class Metrics:
    """Counters and histograms of one run, fed one ``RequestRecord`` at a time."""

    def __init__(
        self, *, closed_loop: bool, t0_ns: int, goodput_limits: dict[str, float] | None = None
    ) -> None:
        self.closed_loop = closed_loop
        self.goodput_limits = goodput_limits or {}
        """Per-request limits (ms) of the SLOs; a measured ok request within all is goodput."""
        self.goodput = 0
        self.t0_ns = t0_ns
        self.total = MetricSet()
        self.interval = MetricSet()
        self.by_category: dict[str, MetricSet] = {}
        self.outcomes: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.warmup_requests = 0
        self.measured_ok = 0
        self.output_tokens = 0
        self.estimated_token_requests = 0
        self.interval_ok = 0
        self.interval_tokens = 0
        self.rate_history: list[float] = []
        self.token_rate_history: list[float] = []
        self.ttft_p95_history: list[float] = []
        self._spare: MetricSet | None = None
        """TTFT p95 (ms) of each rolled interval (0 when it had none)."""
        self._e2e_sum_us = 0.0
        self._e2e_n = 0
        self.tool_stats: Counter[str] = Counter()
        self.server_timings = ServerTimings()
        self.last_end_ns: int | None = None
        self.measure_start_ns: int | None = None
        self._gaps: list[int] = []
        self._gaps_of: RequestRecord | None = None

    @property
    def sent(self) -> int:
        """Requests accounted for so far (each has exactly one outcome)."""
        return sum(self.outcomes.values())

    def add(self, rec: RequestRecord) -> None:
        """Account for a finished request; record its latencies unless it was warm-up."""
        self.outcomes[rec.outcome] += 1
        if rec.error_class:
            self.errors[rec.error_class] += 1
        if rec.warmup:
            self.warmup_requests += 1
            return
        if self.measure_start_ns is None or rec.intended_ns < self.measure_start_ns:
            self.measure_start_ns = rec.intended_ns
        if self.last_end_ns is None or rec.end_ns > self.last_end_ns:
            self.last_end_ns = rec.end_ns
        if rec.outcome == "ok":
            self.server_timings.add(rec)
            if self.goodput_limits and meets(self.goodput_limits, rec):
                self.goodput += 1
        if rec.tool_call_valid is not None:
            self.tool_stats["responses_with_calls"] += 1
            self.tool_stats["valid"] += rec.tool_call_valid
            if rec.tool_call_correct is not None:
                self.tool_stats["judged"] += 1
                self.tool_stats["correct"] += rec.tool_call_correct
        if rec.outcome != "ok":
            return
        self.measured_ok += 1
        self.output_tokens += rec.output_tokens
        self.interval_tokens += rec.output_tokens
        self.interval_ok += 1
        self.estimated_token_requests += rec.tokens_estimated
        self._e2e_sum_us += (rec.end_ns - rec.sent_ns) / 1e3
        self._e2e_n += 1
        for ms in (self.interval, self.category(rec.category)):
            self._record(ms, rec)

    def category(self, name: str) -> MetricSet:
        """The (cumulative) metric set of one category."""
        cat = self.by_category.get(name)
        if cat is None:
            cat = self.by_category[name] = MetricSet()
        return cat

    def _record(self, ms: MetricSet, rec: RequestRecord) -> None:
        expected = self._e2e_sum_us / self._e2e_n if self.closed_loop and self._e2e_n else 0.0
        origin_raw = rec.sent_ns
        origin_cor = rec.intended_ns
        ms.record("dispatch_lag_ms", (rec.sent_ns - rec.intended_ns) / 1e3)
        ms.record("e2e_ms", (rec.end_ns - origin_raw) / 1e3)
        self._corrected(ms, "e2e_ms", rec.end_ns, origin_raw, origin_cor, expected)
        if rec.first_token_ns is not None:
            ms.record("ttft_ms", (rec.first_token_ns - origin_raw) / 1e3)
            self._corrected(ms, "ttft_ms", rec.first_token_ns, origin_raw, origin_cor, expected)
        if rec.tool_call_ns is not None:
            ms.record("tool_call_ms", (rec.tool_call_ns - origin_raw) / 1e3)
            self._corrected(ms, "tool_call_ms", rec.tool_call_ns, origin_raw, origin_cor, expected)
        tpot = rec.tpot_ns
        if tpot is not None:
            ms.record("tpot_ms", tpot / 1e3)
        chunks = rec.token_chunk_ns
        if len(chunks) > 1:
            gaps = self._gaps if self._gaps_of is rec else self._chunk_gaps(rec)
            ms.out_of_range += record_many(ms.hists["itl_ms"], gaps)
            ms.sums["itl_ms"] += (chunks[-1] - chunks[0]) / 1000
        if chunks and rec.output_tokens:
            # Stored x1000 so the integer histogram keeps three decimals.
            ms.record("tokens_per_chunk", 1000 * rec.output_tokens / len(chunks))

    def _chunk_gaps(self, rec: RequestRecord) -> list[int]:
        # Computed once per record although two sets (interval, category) record them.
        c = rec.token_chunk_ns
        self._gaps = [(b - a) // 1000 for a, b in itertools.pairwise(c)]
        self._gaps_of = rec
        return self._gaps

    def _corrected(
        self, ms: MetricSet, name: str, at: int, raw: int, cor: int, expected_us: float
    ) -> None:
        if self.closed_loop:
            ms.record(f"{name}_corrected", (at - raw) / 1e3, expected_us)
        else:
            ms.record(f"{name}_corrected", (at - cor) / 1e3)

    def roll(self, seconds: float) -> MetricSet:
        """Close the current interval: merge it into the totals and return it.

        The caller writes the returned set to the interval log; recording goes on into
        a fresh set.
        """
        done = self.interval
        self.total.add(done)
        self.rate_history.append(self.interval_ok / seconds if seconds > 0 else 0.0)
        self.token_rate_history.append(self.interval_tokens / seconds if seconds > 0 else 0.0)
        ttft = done.hists["ttft_ms"]
        self.ttft_p95_history.append(
            fast_percentile(ttft, 95) / 1e3 if ttft.get_total_count() else 0.0
        )
        self.interval_ok = 0
        self.interval_tokens = 0
        # Double buffering: the set returned last time has been written by now and is
        # cleared for reuse; allocating 14 fresh histograms costs ~2.5 ms of loop time.
        spare = self._spare if self._spare is not None else MetricSet()
        spare.clear()
        self.interval = spare
        self._spare = done
        return done

    def snapshot(self, in_flight: int, warmup: bool) -> Snapshot:
        """A frozen view for display; percentiles over the totals rolled so far."""
        h = self.total.hists

        def p(name: str, q: float) -> float:
            hist = h[name]
            return fast_percentile(hist, q) / 1e3 if hist.get_total_count() else 0.0

        return Snapshot(
            elapsed_s=(time.perf_counter_ns() - self.t0_ns) / 1e9,
            sent=self.sent + in_flight,
            ok=self.outcomes["ok"],
            failed=self.outcomes["failed"],
            cancelled=self.outcomes["cancelled"],
            in_flight=in_flight,
            warmup=warmup,
            requests_per_s=self.rate_history[-1] if self.rate_history else 0.0,
            output_tokens_per_s=self.token_rate_history[-1] if self.token_rate_history else 0.0,
            ttft_p50_ms=p("ttft_ms", 50),
            ttft_p99_ms=p("ttft_ms", 99),
            tpot_p50_ms=p("tpot_ms", 50),
            e2e_p50_ms=p("e2e_ms", 50),
            e2e_p99_ms=p("e2e_ms", 99),
            dispatch_lag_p99_ms=p("dispatch_lag_ms", 99),
            errors=dict(self.errors),
            rate_history=tuple(self.rate_history[-120:]),
        )
