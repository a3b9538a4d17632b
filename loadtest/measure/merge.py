"""Metrics of several driver processes as one: encoded HdrHistograms, summed counters.

A worker turns its ``Metrics`` into plain JSON (``encode_metrics``): every non-empty
histogram in HdrHistogram's compressed encoding, counters as numbers. The parent
decodes and adds them (``merge_metrics``); adding HdrHistograms is exact, so the merged
percentiles are those of one histogram that had recorded every value.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Generator, Sequence
from typing import NotRequired, TypedDict, TypeVar, cast

from hdrh.histogram import HdrHistogram

from loadtest.measure.reasoning import EncodedReasoning, ReasoningTally
from loadtest.measure.recorders import Metrics, MetricSet

__all__ = [
    "EncodedMetrics",
    "EncodedSet",
    "decode_hist",
    "encode_hist",
    "encode_metrics",
    "encode_metrics_steps",
    "encode_set",
    "merge_metrics",
    "merge_set",
]

_COUNTERS = (
    "warmup_requests",
    "measured_ok",
    "kernel_stamped",
    "output_tokens",
    "decode_tokens",
    "decode_steps",
    "estimated_token_requests",
    "goodput",
)
_TIMING_FIELDS = (
    "responses",
    "draft_n",
    "draft_accepted",
    "prompt_ms_total",
    "predicted_ms_total",
    "predicted_n",
)


def encode_hist(h: HdrHistogram) -> str:
    """A histogram as text (HdrHistogram's compressed encoding), to cross processes."""
    return str(h.encode().decode("ascii"))


def decode_hist(text: str) -> HdrHistogram:
    """The histogram ``encode_hist`` made."""
    return HdrHistogram.decode(text.encode("ascii"))


class EncodedSet(TypedDict):
    """One ``MetricSet`` as JSON: its non-empty histograms encoded, exact sums."""

    hists: dict[str, str]
    sums: dict[str, float]
    out_of_range: int


class EncodedTimings(TypedDict):
    """The server-reported timings' counters and their two histograms."""

    fields: dict[str, float]
    overhead: str
    prompt: str


class EncodedMetrics(TypedDict):
    """A whole ``Metrics`` as JSON, to cross a process (a worker's, the dashboard's)."""

    total: EncodedSet
    by_category: dict[str, EncodedSet]
    outcomes: dict[str, int]
    errors: dict[str, int]
    tool_stats: dict[str, int]
    counters: dict[str, int]
    measure_start_ns: int | None
    last_end_ns: int | None
    goodput_limits: dict[str, float]
    server_timings: EncodedTimings
    reasoning: NotRequired[EncodedReasoning]


def encode_set(ms: MetricSet) -> EncodedSet:
    """One metric set as JSON: non-empty histograms encoded, exact sums, out-of-range."""
    return _drain(_set_steps(ms, None))


def _set_steps(ms: MetricSet, names: Collection[str] | None) -> Generator[None, None, EncodedSet]:
    yield from ms.flush_steps()
    hists = {}
    for n, h in ms.hists.items():
        if h.get_total_count() and (names is None or n in names):
            hists[n] = encode_hist(h)
            yield
    return {
        "hists": hists,
        "sums": {n: v for n, v in ms.sums.items() if v},
        "out_of_range": ms.out_of_range,
    }


T = TypeVar("T")


def _drain(steps: Generator[None, None, T]) -> T:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return cast(T, done.value)


def merge_set(into: MetricSet, data: EncodedSet) -> None:
    """Add an encoded metric set into ``into``."""
    for name, text in data["hists"].items():
        into.hists[name].add(decode_hist(text))
    for name, v in data["sums"].items():
        into.sums[name] += v
    into.out_of_range += data["out_of_range"]


def encode_metrics(m: Metrics) -> EncodedMetrics:
    """A worker's whole ``Metrics`` (after its last roll) as JSON."""
    return _drain(encode_metrics_steps(m))


def encode_metrics_steps(
    m: Metrics, names: Collection[str] | None = None
) -> Generator[None, None, EncodedMetrics]:
    """``encode_metrics`` a histogram at a time (only ``names``, when given): it yields
    after each (tens of µs; docs/benchmarks.md), so that a caller in an event loop can let
    reads run between them, and returns the encoding. Encoding every set at once holds a loop for
    milliseconds, which the client lag of every stream open at the time would show."""
    total = yield from _set_steps(m.total, names)
    by_category = {}
    for c, ms in list(m.by_category.items()):
        by_category[c] = yield from _set_steps(ms, names)
    st = m.server_timings
    return {
        "total": total,
        "by_category": by_category,
        "outcomes": dict(m.outcomes),
        "errors": dict(m.errors),
        "tool_stats": dict(m.tool_stats),
        "counters": {k: getattr(m, k) for k in _COUNTERS},
        "measure_start_ns": m.measure_start_ns,
        "last_end_ns": m.last_end_ns,
        "goodput_limits": m.goodput_limits,
        "server_timings": {
            "fields": {k: getattr(st, k) for k in _TIMING_FIELDS},
            "overhead": encode_hist(st._overhead),
            "prompt": encode_hist(st._prompt),
        },
        "reasoning": _encode_reasoning(m.reasoning),
    }


def _encode_reasoning(t: ReasoningTally) -> EncodedReasoning:
    return {
        "counts": dict(t.counts),
        "splits": dict(t.splits),
        "hists": {n: encode_hist(h) for n, h in t.hists.items() if h.get_total_count()},
        "sums": dict(t.sums),
    }


def _merge_reasoning(t: ReasoningTally, data: EncodedReasoning) -> None:
    for k, n in data["counts"].items():
        t.counts[k] += n
    t.splits.update(Counter(data["splits"]))
    for k, text in data["hists"].items():
        t.hists[k].add(decode_hist(text))
    for k, v in data["sums"].items():
        t.sums[k] += v


def merge_metrics(parts: Sequence[EncodedMetrics], *, closed_loop: bool, t0_ns: int) -> Metrics:
    """One ``Metrics`` holding the sum of the encoded ``parts``."""
    limits = parts[0]["goodput_limits"] if parts else {}
    m = Metrics(closed_loop=closed_loop, t0_ns=t0_ns, goodput_limits=limits)
    for p in parts:
        merge_set(m.total, p["total"])
        for cat, data in p["by_category"].items():
            merge_set(m.category(cat), data)
        m.outcomes.update(Counter(p["outcomes"]))
        m.errors.update(Counter(p["errors"]))
        m.tool_stats.update(Counter(p["tool_stats"]))
        for k in _COUNTERS:
            setattr(m, k, getattr(m, k) + p["counters"][k])
        if (start := p["measure_start_ns"]) is not None:
            cur = m.measure_start_ns
            m.measure_start_ns = start if cur is None else min(cur, start)
        if (end := p["last_end_ns"]) is not None:
            m.last_end_ns = end if m.last_end_ns is None else max(m.last_end_ns, end)
        st, timings = m.server_timings, p["server_timings"]
        for k in _TIMING_FIELDS:
            setattr(st, k, getattr(st, k) + timings["fields"][k])
        st._overhead.add(decode_hist(timings["overhead"]))
        st._prompt.add(decode_hist(timings["prompt"]))
        if "reasoning" in p:  # absent from the parts of a version before it
            _merge_reasoning(m.reasoning, p["reasoning"])
    return m
