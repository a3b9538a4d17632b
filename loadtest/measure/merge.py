"""Metrics of several driver processes as one: encoded HdrHistograms, summed counters.

A worker turns its ``Metrics`` into plain JSON (``encode_metrics``): every non-empty
histogram in HdrHistogram's compressed encoding, counters as numbers. The parent
decodes and adds them (``merge_metrics``); adding HdrHistograms is exact, so the merged
percentiles are those of one histogram that had recorded every value.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Generator
from typing import Any

from hdrh.histogram import HdrHistogram

from loadtest.measure.recorders import Metrics, MetricSet

__all__ = [
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


def encode_set(ms: MetricSet) -> dict[str, Any]:
    """One metric set as JSON: non-empty histograms encoded, exact sums, out-of-range."""
    return _drain(_set_steps(ms, None))


def _set_steps(
    ms: MetricSet, names: Collection[str] | None
) -> Generator[None, None, dict[str, Any]]:
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


def _drain(steps: Generator[None, None, dict[str, Any]]) -> dict[str, Any]:
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def merge_set(into: MetricSet, data: dict[str, Any]) -> None:
    """Add an encoded metric set into ``into``."""
    for name, text in data["hists"].items():
        into.hists[name].add(decode_hist(text))
    for name, v in data["sums"].items():
        into.sums[name] += v
    into.out_of_range += data["out_of_range"]


def encode_metrics(m: Metrics) -> dict[str, Any]:
    """A worker's whole ``Metrics`` (after its last roll) as JSON."""
    return _drain(encode_metrics_steps(m))


def encode_metrics_steps(
    m: Metrics, names: Collection[str] | None = None
) -> Generator[None, None, dict[str, Any]]:
    """``encode_metrics`` a histogram at a time (only ``names``, when given): it yields
    after each (some 40 µs), so that a caller in an event loop can let reads run
    between them, and returns the encoding. Encoding every set at once holds a loop for
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
            **{k: getattr(st, k) for k in _TIMING_FIELDS},
            "overhead": encode_hist(st._overhead),
            "prompt": encode_hist(st._prompt),
        },
    }


def merge_metrics(parts: list[dict[str, Any]], *, closed_loop: bool, t0_ns: int) -> Metrics:
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
        for key, pick in (("measure_start_ns", min), ("last_end_ns", max)):
            v = p[key]
            if v is not None:
                cur = getattr(m, key)
                setattr(m, key, v if cur is None else pick(cur, v))
        st, data = m.server_timings, p["server_timings"]
        for k in _TIMING_FIELDS:
            setattr(st, k, getattr(st, k) + data[k])
        st._overhead.add(decode_hist(data["overhead"]))
        st._prompt.add(decode_hist(data["prompt"]))
    return m
