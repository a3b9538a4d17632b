"""Task-level accounting: outcomes, time to a valid call, task time, shares of time.

Latency-like values go into the run's ``MetricSet``s (so they are in the ``.hlog``, the
summary and per category like every metric): ``valid_call_ms`` per step, ``task_ms``
per completed task, ``task_steps`` and ``task_retries`` per task (recorded x1000, so
the ``.hgrm``'s millisecond scale prints counts). Shares of task time per part go into
their own histograms (in basis points), so nothing per task is held in memory.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import cast

from hdrh.histogram import HdrHistogram

from loadtest.features.agent.session import PARTS, TaskRecord
from loadtest.measure.hdr import metric_stats
from loadtest.measure.merge import decode_hist, encode_hist
from loadtest.measure.recorders import MetricSet, fast_percentile
from loadtest.model.json import JsonObject
from loadtest.model.summary import AgentBlock, AgentCategory, AgentSteps

__all__ = ["AgentMetrics"]


class AgentMetrics:
    """Counters of ended tasks and the histograms of their time shares."""

    def __init__(self) -> None:
        self.outcomes: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.by_category: dict[str, Counter[str]] = {}
        self.warmup = 0
        self.expected_matched = 0
        self.expected_total = 0
        self.shares = {p: HdrHistogram(1, 10_001, 3) for p in PARTS}

    @property
    def ended(self) -> int:
        """Measured tasks that ended, whatever the outcome."""
        return sum(self.outcomes.values())

    def add(self, rec: TaskRecord, sets: Sequence[MetricSet]) -> None:
        """Account for one ended task, recording into each of ``sets``."""
        if rec.warmup:
            self.warmup += 1
            return
        self.outcomes[rec.outcome] += 1
        self.by_category.setdefault(rec.category, Counter())[rec.outcome] += 1
        if rec.error_class:
            self.errors[rec.error_class] += 1
        self.expected_matched += rec.expected_matched
        self.expected_total += rec.expected_total
        for ms in sets:
            for v in rec.valid_call_ns:
                ms.record("valid_call_ms", v / 1e3)
            if rec.outcome == "completed":
                ms.record("task_ms", rec.task_ns / 1e3)
            ms.record("task_steps", 1000 * rec.steps)
            ms.record("task_retries", 1000 * rec.retries)
        if rec.outcome == "completed":
            for part, share in rec.shares().items():
                # +1: a share of 0 is a real value, and the histogram starts at 1.
                self.shares[part].record_value(1 + round(share * 10_000))

    def encode(self) -> JsonObject:
        """The counters and share histograms as JSON: a worker's part, for the merge."""
        return {
            "outcomes": dict(self.outcomes),
            "errors": dict(self.errors),
            "by_category": {k: dict(v) for k, v in self.by_category.items()},
            "warmup": self.warmup,
            "expected_matched": self.expected_matched,
            "expected_total": self.expected_total,
            "shares": {p: encode_hist(h) for p, h in self.shares.items()},
        }

    def add_encoded(self, data: JsonObject) -> None:
        """Add a worker's ``encode()``: counters summed, histograms added (exact)."""
        self.outcomes.update(Counter(cast(dict[str, int], data["outcomes"])))
        self.errors.update(Counter(cast(dict[str, int], data["errors"])))
        for cat, counts in cast(dict[str, dict[str, int]], data["by_category"]).items():
            self.by_category.setdefault(cat, Counter()).update(Counter(counts))
        self.warmup += cast(int, data["warmup"])
        self.expected_matched += cast(int, data["expected_matched"])
        self.expected_total += cast(int, data["expected_total"])
        for part, text in cast(dict[str, str], data["shares"]).items():
            if part in self.shares:
                self.shares[part].add(decode_hist(text))

    def summary(
        self, total: MetricSet, by_category: dict[str, MetricSet], tool_stats: Counter[str]
    ) -> AgentBlock:
        """The ``agent`` section of summary.json."""

        def block(ms: MetricSet) -> AgentSteps:
            return {
                "time_to_valid_call_ms": metric_stats(
                    ms.hists["valid_call_ms"], ms.sums["valid_call_ms"]
                ),
                "task_ms": metric_stats(ms.hists["task_ms"], ms.sums["task_ms"]),
                "steps": metric_stats(ms.hists["task_steps"], ms.sums["task_steps"]),
                "retries": metric_stats(ms.hists["task_retries"], ms.sums["task_retries"]),
            }

        ended = self.ended
        calls = tool_stats["responses_with_calls"]
        out: AgentBlock = {
            "tasks": ended,
            "completed": self.outcomes["completed"],
            "failed": self.outcomes["failed"],
            "step_limit": self.outcomes["step_limit"],
            "cancelled": self.outcomes["cancelled"],
            "warmup": self.warmup,
            "errors": dict(self.errors),
            "completion_rate": round(self.outcomes["completed"] / ended, 4) if ended else None,
            "validity_rate": round(tool_stats["valid"] / calls, 4) if calls else None,
            "expected_match_rate": round(self.expected_matched / self.expected_total, 4)
            if self.expected_total
            else None,
            **block(total),
            "time_shares": {
                p: {
                    "p50": round((fast_percentile(h, 50) - 1) / 10_000, 4),
                    "p95": round((fast_percentile(h, 95) - 1) / 10_000, 4),
                }
                for p, h in self.shares.items()
                if h.get_total_count()
            },
            "by_category": {},
        }
        for cat, c in sorted(self.by_category.items()):
            row: AgentCategory = {"tasks": sum(c.values()), "completed": c["completed"]}
            if cat in by_category:
                b = block(by_category[cat])
                row["time_to_valid_call_ms"] = b["time_to_valid_call_ms"]
                row["task_ms"] = b["task_ms"]
                row["steps"] = b["steps"]
                row["retries"] = b["retries"]
            out["by_category"][cat] = row
        return out
