"""The reasoning of a run's measured requests, added up for the summary's block.

Counters and three histograms (reasoning time and answer time in µs, reasoning tokens
as counts), encoded to cross processes like the latency histograms and added exactly
(``measure.merge``). The per-request figures are ``model.reasoning.ReasoningSplit``'s.
"""

from __future__ import annotations

from collections import Counter
from typing import TypedDict

from loadtest.measure.hdr import metric_stats, new_histogram
from loadtest.model.reasoning import SPLIT_WAYS, ReasoningBlock
from loadtest.model.record import RequestRecord

__all__ = ["EncodedReasoning", "ReasoningTally"]

_COUNTS = ("requests", "with_reasoning", "tokens", "answer_tokens", "tokens_disagree")
_HISTS = ("reasoning_ms", "answer_ms", "tokens_per_request")


class EncodedReasoning(TypedDict):
    """A ``ReasoningTally`` as JSON: counters, splits, histograms (HDR-encoded) and the
    histograms' sums (for their means)."""

    counts: dict[str, int]
    splits: dict[str, int]
    hists: dict[str, str]
    sums: dict[str, float]


class ReasoningTally:
    """Adds up the reasoning of measured ok requests (``Metrics.add`` feeds it)."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(_COUNTS, 0)
        self.splits: Counter[str] = Counter()
        self.hists = {name: new_histogram() for name in _HISTS}
        self.sums = dict.fromkeys(_HISTS, 0.0)

    def add(self, rec: RequestRecord) -> None:
        """Account for one measured ok request."""
        counts = self.counts
        counts["requests"] += 1
        split = rec.reasoning
        if split is None:
            self.splits["none"] += 1
            return
        self.splits[split.way] += 1
        counts["with_reasoning"] += 1
        counts["tokens"] += split.tokens
        counts["answer_tokens"] += max(0, rec.output_tokens - split.tokens)
        counts["tokens_disagree"] += split.disagree
        self._record("reasoning_ms", split.reasoning_ns / 1e3)
        self._record("tokens_per_request", split.tokens)
        if split.answer_ns is not None and rec.last_token_ns is not None:
            self._record("answer_ms", (rec.last_token_ns - split.answer_ns) / 1e3)

    def _record(self, name: str, value: float) -> None:
        # Zero (a one-chunk segment) reads as the histogram's floor, 1 µs or 1 token.
        if self.hists[name].record_value(max(1, int(value))):
            self.sums[name] += value

    def summary(self) -> ReasoningBlock | None:
        """The ``reasoning`` block (None where no measured request reasoned)."""
        c = self.counts
        if not c["with_reasoning"]:
            return None
        return {
            "requests": c["requests"],
            "with_reasoning": c["with_reasoning"],
            "share": round(c["with_reasoning"] / c["requests"], 4),
            "splits": {way: self.splits[way] for way in SPLIT_WAYS},
            "tokens": c["tokens"],
            "answer_tokens": c["answer_tokens"],
            "tokens_per_request": metric_stats(
                self.hists["tokens_per_request"], self.sums["tokens_per_request"], scale=1
            ),
            "reasoning_ms": metric_stats(self.hists["reasoning_ms"], self.sums["reasoning_ms"]),
            "answer_ms": metric_stats(self.hists["answer_ms"], self.sums["answer_ms"]),
            "tokens_disagree": c["tokens_disagree"],
        }
