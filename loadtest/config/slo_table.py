"""The scenario's ``[slo]`` table and ``--slo`` flags: thresholds as typed specs.

Parsing lives with the rest of the scenario so that config needs nothing above it;
``loadtest.measure.slo`` judges these specs against a run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from loadtest.config.toml_tables import Table
from loadtest.errors import UsageError
from loadtest.model.record import CORRECTED, METRICS

__all__ = [
    "PER_REQUEST_METRICS",
    "SLO_METRICS",
    "SLO_STATS",
    "SLOSpec",
    "Threshold",
    "parse_slo_flag",
    "parse_slo_table",
]

SLO_METRICS = (
    *METRICS,
    *(f"{m}_corrected" for m in CORRECTED),
    "valid_call_ms",
    "task_ms",
)
SLO_STATS = ("mean", "p50", "p90", "p95", "p99", "p999", "max")
PER_REQUEST_METRICS = ("ttft_ms", "ttfa_ms", "tpot_ms", "e2e_ms", "tool_call_ms")
_LEGACY = {"ttft_p99_ms": "ttft_ms", "tpot_p99_ms": "tpot_ms", "e2e_p99_ms": "e2e_ms"}


@dataclass(frozen=True, slots=True)
class Threshold:
    """One objective: ``metric.stat <= limit`` (``stat`` is None for ``error_rate``)."""

    metric: str
    stat: str | None
    limit: float

    @property
    def label(self) -> str:
        """``ttft_ms.p95``, or ``error_rate``."""
        return f"{self.metric}.{self.stat}" if self.stat else self.metric


@dataclass(frozen=True, slots=True)
class SLOSpec:
    """The objectives of a run (empty: nothing checked, goodput not counted)."""

    thresholds: tuple[Threshold, ...] = ()

    def merged(self, more: tuple[Threshold, ...]) -> SLOSpec:
        """These thresholds with ``more`` on top (same label: ``more`` wins)."""
        by_label = {t.label: t for t in self.thresholds}
        by_label.update({t.label: t for t in more})
        return SLOSpec(tuple(by_label.values()))

    def request_limits(self) -> dict[str, float]:
        """The tightest limit per per-request metric, for goodput."""
        limits: dict[str, float] = {}
        for t in self.thresholds:
            base = t.metric.removesuffix("_corrected")
            if base in PER_REQUEST_METRICS:
                limits[t.metric] = min(limits.get(t.metric, math.inf), t.limit)
        return limits


def _threshold(metric: str, stat: str | None, limit: Any, fail: Any) -> Threshold:
    if metric == "error_rate":
        if stat is not None:
            raise fail(f"error_rate takes no statistic, got error_rate.{stat}")
    elif metric not in SLO_METRICS:
        raise fail(f"unknown metric {metric!r}; expected error_rate or one of {SLO_METRICS}")
    elif stat not in SLO_STATS:
        raise fail(f"unknown statistic {stat!r} of {metric}; expected one of {SLO_STATS}")
    if isinstance(limit, bool) or not isinstance(limit, int | float):
        raise fail(f"expected a number as the limit of {metric}, got {limit!r}")
    if not math.isfinite(limit) or limit < 0:
        raise fail(f"expected a limit >= 0 for {metric}, got {limit!r}")
    return Threshold(metric, stat, float(limit))


def parse_slo_table(t: Table) -> SLOSpec:
    """The ``[slo]`` table: ``ttft_ms.p95 = 500``, ``error_rate = 0.01`` and legacy keys."""
    out = []
    for key, value in t.data.items():
        t.used.add(key)

        def fail(problem: str, key: str = key) -> Exception:
            return t.fail(key, problem)

        if key in _LEGACY:
            out.append(_threshold(_LEGACY[key], "p99", value, fail))
        elif key in ("error_rate", "max_error_rate"):
            out.append(_threshold("error_rate", None, value, fail))
        elif isinstance(value, dict):
            for stat, limit in value.items():
                out.append(_threshold(key, stat, limit, fail))
        else:
            raise fail(
                f"expected a table of limits such as {key}.p95 = 500 "
                "(metric.statistic = milliseconds), or error_rate = 0.01"
            )
    return SLOSpec(tuple(out))


def parse_slo_flag(text: str) -> tuple[Threshold, ...]:
    """``--slo ttft_ms.p95=500[,e2e_ms.p99=2000]``; ``UsageError`` naming the bad part."""
    out = []
    for part in text.split(","):
        name, eq, value = part.strip().partition("=")
        if not eq:
            raise UsageError(f"--slo {part!r}: expected METRIC.STAT=LIMIT, e.g. ttft_ms.p95=500")
        metric, _, stat = name.strip().partition(".")
        try:
            limit = float(value)
        except ValueError:
            raise UsageError(f"--slo {part!r}: the limit {value!r} is not a number") from None

        def fail(problem: str, part: str = part) -> Exception:
            return UsageError(f"--slo {part!r}: {problem}")

        out.append(_threshold(metric, stat or None, limit, fail))
    return tuple(out)
