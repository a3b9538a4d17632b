"""Prometheus histograms read from a scrape: buckets, the change between two, quantiles.

A server's latency histogram (vLLM's ``vllm:time_to_first_token_seconds``) counts from
its start; what one run added is the difference between a scrape at each edge of the
run's window. Its quantiles are estimated as Prometheus' ``histogram_quantile`` does:
linearly within the bucket the rank falls in, so they are as fine as the buckets are
(vLLM's inter-token buckets start at 0-10 ms: a faster server reads as inside that one).
"""

from __future__ import annotations

import math
from typing import TypedDict

from prometheus_client.metrics_core import Metric

__all__ = ["Buckets", "bucket_bounds", "bucket_quantile", "buckets_between", "family_buckets"]


class Buckets(TypedDict):
    """One histogram, summed over its label sets, as ``metrics.jsonl`` keeps it."""

    le: list[float]
    """The finite upper bounds, ascending."""
    counts: list[float]
    """Cumulative counts at each bound, then the total (the +Inf bucket)."""


def family_buckets(family: Metric) -> Buckets | None:
    """The ``_bucket`` samples of a histogram family, added up over its label sets
    (models, engines); None when it has none or no +Inf bucket."""
    by_le: dict[float, float] = {}
    for sample in family.samples:
        if sample.name.endswith("_bucket") and "le" in sample.labels:
            le = float(sample.labels["le"])
            by_le[le] = by_le.get(le, 0.0) + float(sample.value)
    if math.inf not in by_le:
        return None
    bounds = sorted(b for b in by_le if b != math.inf)
    return {"le": bounds, "counts": [by_le[b] for b in bounds] + [by_le[math.inf]]}


def buckets_between(start: Buckets, end: Buckets) -> Buckets | None:
    """What was observed between two scrapes; None when they cannot be subtracted (the
    bounds changed, or a count went down: the server restarted in between)."""
    if start["le"] != end["le"] or len(start["counts"]) != len(end["counts"]):
        return None
    counts = [b - a for a, b in zip(start["counts"], end["counts"], strict=True)]
    if any(c < 0 for c in counts):
        return None
    return {"le": list(end["le"]), "counts": counts}


def _locate(q: float, buckets: Buckets) -> tuple[float, float, float, float] | None:
    """The bucket that the rank ``q * total`` falls in: (lower bound, upper bound,
    observations below it, observations in it); a rank in the +Inf bucket gives (highest
    finite bound, inf, ...). None without observations."""
    counts = buckets["counts"]
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, cumulative in zip(buckets["le"], counts, strict=False):
        if cumulative >= rank:
            return lower, bound, below, cumulative - below
        lower, below = bound, cumulative
    return lower, math.inf, below, total - below


def bucket_quantile(q: float, buckets: Buckets) -> float | None:
    """The ``q`` quantile (0..1) of the observations, None without any.

    As ``histogram_quantile``: the rank ``q * total`` is found in the cumulative counts
    and interpolated linearly between the bucket's lower bound (0 for the first) and its
    upper one; a rank in the +Inf bucket gives the highest finite bound.
    """
    found = _locate(q, buckets)
    if found is None:
        return None
    lower, upper, below, inside = found
    if upper == math.inf:
        return buckets["le"][-1] if buckets["le"] else None
    share = (q * buckets["counts"][-1] - below) / inside if inside > 0 else 1.0
    return lower + (upper - lower) * share


def bucket_bounds(q: float, buckets: Buckets) -> tuple[float, float, float] | None:
    """The bucket that holds the ``q`` quantile: its lower and upper bound and how many
    observations it holds. That is all the histogram knows of the quantile
    (``bucket_quantile``'s figure is a guess inside it). The first bucket starts at 0; a
    rank in the +Inf bucket gives (highest finite bound, inf). None without observations."""
    found = _locate(q, buckets)
    return None if found is None else (found[0], found[1], found[3])
