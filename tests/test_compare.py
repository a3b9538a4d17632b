"""Two runs side by side."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.errors import UsageError
from loadtest.report.compare import compare_summaries, load_summary, render_comparison


def _summary(run: str, ttft_p50: float, ok: int) -> dict[str, object]:
    stats = {"count": 10, "p50": ttft_p50, "p95": ttft_p50 * 2, "p99": ttft_p50 * 3}
    return {
        "run": {"id": run, "endpoint": "http://x"},
        "requests": {"sent": 10, "ok": ok},
        "throughput": {"output_tokens_per_s": 100.0},
        "metrics": {"ttft_ms": stats, "tpot_ms": {"count": 0}},
    }


def test_differences_and_ratios() -> None:
    c = compare_summaries(_summary("a", 100.0, 10), _summary("b", 50.0, 9))
    assert c["metrics"]["ttft_ms"]["p50"] == {"a": 100.0, "b": 50.0, "diff": -50.0, "ratio": 0.5}
    assert "tpot_ms" not in c["metrics"]  # nothing recorded on one side
    assert (c["a"]["completion_rate"], c["b"]["completion_rate"]) == (1.0, 0.9)
    assert "ttft_ms" in render_comparison(c)


def test_a_folder_without_a_summary_is_named(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=str(tmp_path / "summary.json")):
        load_summary(tmp_path)
