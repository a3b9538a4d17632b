"""Metrics of several driver processes as one: encoded HdrHistograms, summed counters.

A worker turns its ``Metrics`` into plain JSON (``encode_metrics``): every non-empty
histogram in HdrHistogram's compressed encoding, counters as numbers. The parent
decodes and adds them (``merge_metrics``); adding HdrHistograms is exact, so the merged
percentiles are those of one histogram that had recorded every value.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from hdrh.histogram import HdrHistogram

from loadtest.measure.recorders import Metrics, MetricSet

__all__ = ["encode_metrics", "encode_set", "merge_metrics", "merge_set"]

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


def _enc(h: HdrHistogram) -> str:
    return str(h.encode().decode("ascii"))


def _dec(text: str) -> HdrHistogram:
    return HdrHistogram.decode(text.encode("ascii"))


def encode_set(ms: MetricSet) -> dict[str, Any]:
    """One metric set as JSON: non-empty histograms encoded, exact sums, out-of-range."""
    return {
        "hists": {n: _enc(h) for n, h in ms.hists.items() if h.get_total_count()},
        "sums": {n: v for n, v in ms.sums.items() if v},
        "out_of_range": ms.out_of_range,
    }


def merge_set(into: MetricSet, data: dict[str, Any]) -> None:
    """Add an encoded metric set into ``into``."""
    for name, text in data["hists"].items():
        into.hists[name].add(_dec(text))
    for name, v in data["sums"].items():
        into.sums[name] += v
    into.out_of_range += data["out_of_range"]


def encode_metrics(m: Metrics) -> dict[str, Any]:
    """A worker's whole ``Metrics`` (after its last roll) as JSON."""
    st = m.server_timings
    return {
        "total": encode_set(m.total),
        "by_category": {c: encode_set(ms) for c, ms in m.by_category.items()},
        "outcomes": dict(m.outcomes),
        "errors": dict(m.errors),
        "tool_stats": dict(m.tool_stats),
        "counters": {k: getattr(m, k) for k in _COUNTERS},
        "measure_start_ns": m.measure_start_ns,
        "last_end_ns": m.last_end_ns,
        "goodput_limits": m.goodput_limits,
        "server_timings": {
            **{k: getattr(st, k) for k in _TIMING_FIELDS},
            "overhead": _enc(st._overhead),
            "prompt": _enc(st._prompt),
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
        st._overhead.add(_dec(data["overhead"]))
        st._prompt.add(_dec(data["prompt"]))
    return m
