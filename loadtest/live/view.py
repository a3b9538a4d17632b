"""One moment of a run as the live outputs show it, and the window of its last seconds.

The live outputs (``live.outputs``) never touch the load: they are handed a
``LiveView`` built from what the run's processes already write once a second for the
dashboard (each process's encoded histograms, ``live.json``), merged as the end of the
run merges them. The last view of a run is built from the run's final metrics and its
summary, so what an output says last equals summary.json.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from loadtest.config.scenario import Scenario
from loadtest.measure.hdr import bucket_arrays, target_rank
from loadtest.measure.recorders import Metrics, MetricSet
from loadtest.model.summary import Summary
from loadtest.model.verdict import FaultVerdict

__all__ = ["ALL", "LiveView", "Phase", "RecentWindow", "SeriesKey", "Sparse", "window_counts"]

ALL = "all"
"""The ``category`` label of the whole mix (a category named so is the mix's too)."""

Phase = Literal["warm-up", "measuring", "ended"]

SeriesKey = tuple[str, str]
"""(category, metric name) of one histogram."""

Sparse = tuple[np.ndarray, np.ndarray]
"""A histogram's non-empty buckets: (highest equivalent value in µs, count), by value."""


@dataclass(frozen=True, slots=True)
class LiveView:
    """A run as of one second: its merged metrics, where it is, and (once it ended) its
    summary, from which the final verdicts are read."""

    run_id: str
    scenario: Scenario
    endpoint: str
    """The endpoint's origin (scheme, host, port): never a path, query or key."""
    metrics: Metrics
    in_flight: int
    elapsed_s: float
    """Since the load started, warm-up included: the fault timeline's clock."""
    phase: Phase
    labels: tuple[tuple[str, str], ...] = ()
    """Added to every series: ``side`` (``ab``), ``step`` (``sweep``)."""
    summary: Summary | None = None
    """The run's summary: set on the last view only."""
    faults: tuple[FaultVerdict, ...] = ()
    """The fault windows judged on the requests so far (while the run goes; at its end
    the summary's own verdicts stand instead)."""

    @property
    def measured_s(self) -> float:
        """Seconds of measurement so far (the summary's own once it ended)."""
        if self.summary is not None:
            return float(self.summary["run"]["measured_s"])
        return max(self.elapsed_s - self.scenario.load.warmup_s, 0.0)

    def sets(self) -> dict[str, MetricSet]:
        """Every metric set by category label: the whole mix first."""
        return {ALL: self.metrics.total, **dict(sorted(self.metrics.by_category.items()))}


def _sparse(ms: MetricSet, name: str) -> Sparse:
    _, highest, counts = bucket_arrays(ms.hists[name])
    return highest, counts


def window_counts(now: Sparse, before: Sparse | None) -> Sparse:
    """The buckets of the values recorded between ``before`` and ``now`` (both cumulative
    histograms of one series): exact, as HDR counts subtract bucket by bucket."""
    if before is None or not len(before[0]):
        return now
    values = np.concatenate([now[0], before[0]])
    counts = np.concatenate([now[1], -before[1]])
    unique, where = np.unique(values, return_inverse=True)
    summed = np.bincount(where, weights=counts, minlength=len(unique)).astype(np.int64)
    keep = summed > 0
    return unique[keep], summed[keep]


def sparse_percentile(buckets: Sparse, q: float) -> int | None:
    """The ``q``-th percentile (µs) of the values in ``buckets``, by loadtest's one rank
    (``measure.hdr.target_rank``): what a histogram of those values alone would say."""
    highest, counts = buckets
    if not len(counts):
        return None
    cum = np.cumsum(counts)
    at = target_rank(q, int(cum[-1]))
    return int(highest[min(int(np.searchsorted(cum, at)), len(highest) - 1)])


@dataclass(slots=True)
class RecentWindow:
    """The cumulative histograms of the last ``seconds``, one entry per view, so that a
    view's last-seconds figures are its histograms minus those of ``seconds`` ago."""

    seconds: float = 10.0
    _kept: collections.deque[tuple[float, dict[SeriesKey, Sparse]]] = field(
        default_factory=collections.deque
    )

    def add(self, at_s: float, view: LiveView, names: tuple[str, ...]) -> dict[SeriesKey, Sparse]:
        """Keep ``view``'s histograms of ``names`` as of ``at_s``; returns each series'
        values of the last ``seconds`` (all of them while the run is younger)."""
        now: dict[SeriesKey, Sparse] = {}
        for category, ms in view.sets().items():
            for name in names:
                if ms.hists[name].get_total_count():
                    now[category, name] = _sparse(ms, name)
        while len(self._kept) > 1 and self._kept[1][0] <= at_s - self.seconds:
            self._kept.popleft()
        before = self._kept[0][1] if self._kept and self._kept[0][0] <= at_s - self.seconds else {}
        self._kept.append((at_s, now))
        return {key: window_counts(s, before.get(key)) for key, s in now.items()}

    def clear(self) -> None:
        """Forget every kept view (a new run starts its own window)."""
        self._kept.clear()
