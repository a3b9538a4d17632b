"""HDR recorders for every latency metric, raw and corrected, with live snapshots.

Values are recorded in microseconds (1 µs .. 1 h, 3 significant digits). Each metric is
recorded into a per-interval histogram that is rolled once a second (for the ``.hlog``)
and added into the run total at the roll, so the hot path records each value once; and
"recording" is appending to a list, which numpy empties into the histogram in batches
(``MetricSet``), because hdrh's per-value call costs more than the rest of a request.

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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
from hdrh.histogram import HdrHistogram

from loadtest.measure.hdr import (
    add_into,
    bucket_arrays,
    fast_percentile,
    new_histogram,
    record_array,
    record_corrected_many,
    record_many,
)
from loadtest.measure.reasoning import ReasoningTally
from loadtest.measure.slo import meets
from loadtest.measure.timings import ServerTimings
from loadtest.model.record import CORRECTED, METRICS, RequestRecord, line_ns

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

AGENT_METRICS = ("valid_call_ms", "task_ms", "task_steps", "task_retries")
"""Recorded by agent sessions only (``loadtest.features.agent``): per step and per task."""


_FLUSH_AT = 512
"""Pending values of one metric that are recorded at once: a few tens of µs of numpy,
so no flush holds the event loop for long, and memory stays bounded between reads."""


class MetricSet:
    """One histogram per metric name (``ttft_ms``, ``ttft_ms_corrected``, ...).

    ``record`` only appends to a list, far cheaper than hdrh's ``record_value``
    (docs/benchmarks.md), and a request records some 40 values into two sets: the values
    reach the histograms, with identical counts, when ``hists``, ``sums`` or
    ``out_of_range`` is next read, which the once-a-second roll does.
    """

    NAMES = (
        METRICS
        + tuple(f"{m}_corrected" for m in CORRECTED)
        + ("tokens_per_chunk", "tokens_per_step")
        + AGENT_METRICS
    )

    def __init__(self) -> None:
        self._hists = {name: new_histogram() for name in self.NAMES}
        self._sums: dict[str, float] = dict.fromkeys(self.NAMES, 0.0)
        self._out_of_range = 0
        self._pending: dict[str, list[float]] = {name: [] for name in self.NAMES}
        self._pending_corrected: dict[str, tuple[list[float], list[int]]] = {}

    @property
    def hists(self) -> dict[str, HdrHistogram]:
        """The histograms, with every value recorded so far."""
        self.flush()
        return self._hists

    @property
    def sums(self) -> dict[str, float]:
        """Sum of the recorded (in-range) values per metric, in µs, for means."""
        self.flush()
        return self._sums

    @property
    def out_of_range(self) -> int:
        """Values not recorded because they were negative or over the histograms' range."""
        self.flush()
        return self._out_of_range

    @out_of_range.setter
    def out_of_range(self, value: int) -> None:
        self.flush()
        self._out_of_range = value

    def record(self, name: str, value_us: float, expected_interval_us: float = 0.0) -> None:
        """Record one value; with an expected interval, HdrHistogram-corrected."""
        if expected_interval_us >= 1:
            pending = self._pending_corrected.get(name)
            if pending is None:
                pending = self._pending_corrected[name] = ([], [])
            pending[0].append(value_us)
            pending[1].append(int(expected_interval_us))
            if len(pending[0]) >= _FLUSH_AT:
                self._flush(name, *pending)
        else:
            values = self._pending[name]
            values.append(value_us)
            if len(values) >= _FLUSH_AT:
                self._flush(name, values, None)

    def record_ints(self, name: str, values_us: Sequence[int]) -> None:
        """Record many whole-µs values (a response's chunk gaps)."""
        values = self._pending[name]
        values.extend(values_us)
        if len(values) >= _FLUSH_AT:
            self._flush(name, values, None)

    def flush(self) -> None:
        """Move every pending value into its histogram."""
        for _ in self.flush_steps():
            pass

    def flush_steps(self) -> Iterator[None]:
        """``flush``, one metric per step: a caller in an event loop can let other work
        run between steps, rather than stall for all of them at once (milliseconds when
        a thousand requests end in a second)."""
        for name, values in self._pending.items():
            if values:
                self._flush(name, values, None)
                yield
        for name, (values, expected) in list(self._pending_corrected.items()):
            if values:
                self._flush(name, values, expected)
                yield

    def _flush(self, name: str, values: list[float], expected: list[int] | None) -> None:
        v = np.asarray(values, dtype=np.float64)
        values.clear()
        ints = v.astype(np.int64)  # truncates toward zero, as int() did
        hist = self._hists[name]
        if expected is None:
            ok = record_array(hist, ints)
        else:
            ok = record_corrected_many(hist, ints, np.asarray(expected, dtype=np.int64))
            expected.clear()
        self._sums[name] += float(v[ok].sum())
        self._out_of_range += int(v.size - np.count_nonzero(ok))

    def clear(self) -> None:
        """Empty every histogram (memset: hdrh's own ``reset`` loops in Python)."""
        for values in self._pending.values():
            values.clear()
        self._pending_corrected.clear()
        for name, h in self._hists.items():
            if h.get_total_count():
                ctypes.memset(h.counts, 0, ctypes.sizeof(h.counts))
                h.total_count = 0
                h.min_value = sys.maxsize
                h.max_value = 0
            self._sums[name] = 0.0
        self._out_of_range = 0

    def add(self, other: MetricSet) -> None:
        """Merge ``other`` into this set, losslessly."""
        mine, theirs = self.hists, other.hists
        for name in self.NAMES:
            if theirs[name].get_total_count():
                add_into(mine[name], theirs[name])
            self._sums[name] += other._sums[name]
        self._out_of_range += other._out_of_range


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
        self.kernel_stamped = 0
        """Measured ok requests whose arrivals the kernel stamped (``_compat.kernel_stamps``)."""
        self.output_tokens = 0
        # Summed over the requests with a tokens_per_step (model.summary.DecodeStepsBlock).
        self.decode_tokens = self.decode_steps = 0
        self.estimated_token_requests = 0
        self.interval_ok = 0
        self.interval_tokens = 0
        self.rate_history: list[float] = []
        self.token_rate_history: list[float] = []
        self.ttft_p95_history: list[float] = []
        """TTFT p95 (ms) of each rolled interval (0 when it had none)."""
        self._spare: MetricSet | None = None
        self._e2e_sum_us = 0.0
        self._e2e_n = 0
        self.tool_stats: Counter[str] = Counter()
        self.server_timings = ServerTimings()
        self.reasoning = ReasoningTally()
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
        self.reasoning.add(rec)
        self.kernel_stamped += rec.arrival_clock == "kernel"
        self.output_tokens += rec.output_tokens
        self.interval_tokens += rec.output_tokens
        self.interval_ok += 1
        self.estimated_token_requests += rec.tokens_estimated
        if rec.tokens_per_step is not None:
            self.decode_tokens += rec.output_tokens - 1
            self.decode_steps += rec.token_steps - 1
        # At the line's precision: the expected interval decides how many samples a
        # corrected value stands for, and a rebuild from the lines must count the same.
        self._e2e_sum_us += line_ns(rec.end_ns - rec.sent_ns) / 1e3
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
        if rec.client_lag_ns is not None:
            ms.record("client_lag_ms", rec.client_lag_ns / 1e3)
        ms.record("e2e_ms", (rec.end_ns - origin_raw) / 1e3)
        self._corrected(ms, "e2e_ms", rec.end_ns, origin_raw, origin_cor, expected)
        marks = (rec.first_token_ns, rec.first_answer_ns, rec.tool_call_ns)
        for name, at in zip(("ttft_ms", "ttfa_ms", "tool_call_ms"), marks, strict=True):
            if at is not None:
                ms.record(name, (at - origin_raw) / 1e3)
                self._corrected(ms, name, at, origin_raw, origin_cor, expected)
        tpot = rec.tpot_ns
        if tpot is not None:
            ms.record("tpot_ms", tpot / 1e3)
        chunks = rec.token_chunk_ns
        if len(chunks) > 1:
            gaps = self._gaps if self._gaps_of is rec else self._chunk_gaps(rec)
            ms.record_ints("itl_ms", gaps)
        if chunks and rec.output_tokens:
            # Stored x1000 so the integer histogram keeps three decimals.
            ms.record("tokens_per_chunk", 1000 * rec.output_tokens / len(chunks))
        per_step = rec.tokens_per_step
        if per_step is not None:
            ms.record("tokens_per_step", 1000 * per_step)

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
            ms.record(f"{name}_corrected", line_ns(at - raw) / 1e3, expected_us)
        else:
            ms.record(f"{name}_corrected", (at - cor) / 1e3)

    def roll(self, seconds: float) -> MetricSet:
        """Close the current interval: merge it into the totals and return it (for the
        caller to write to the interval log); recording goes on into a fresh set."""
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
        # cleared for reuse; allocating 14 fresh histograms costs milliseconds of loop
        # time (docs/benchmarks.md).
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
