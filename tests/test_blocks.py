"""Summary blocks through their registry: merged from parts, checked, named on failure.

The plugin package's own block (``tests/plugins``) runs end to end in
``tests/test_plugins.py``; here are the rules every block goes through, on loadtest's
own blocks, in this process.
"""

from __future__ import annotations

from collections import Counter

import pytest

from loadtest.engine.blocks import join_parts, merge_blocks, summary_blocks
from loadtest.errors import UsageError
from loadtest.features.agent.task_metrics import AgentMetrics
from loadtest.measure.recorders import Metrics


def _metrics() -> Metrics:
    return Metrics(closed_loop=True, t0_ns=0)


def test_a_run_without_parts_has_each_blocks_empty_value_and_nothing_else() -> None:
    out = summary_blocks({})
    assert out["faults"] == [] and out["server"] is None
    assert "agent" not in out and "agent_trace" not in out
    assert "multiturn" not in out and "workload" not in out  # files, not summary keys
    assert isinstance(out["faults"], list)
    out["faults"].append("x")
    assert summary_blocks({})["faults"] == []  # each summary its own empty list


def _tally(n: int, median: float) -> dict[str, object]:
    counts = ("requests", "exact_output", "stopped_early", "exact_input")
    return {k: n for k in counts} | {
        "prompt_tokens_reported": n,
        "prompt_overhead_median": median,
        "prompt_overhead_max": int(median) + 1,
    }


def test_parts_merge_in_order_workers_then_the_coordinator() -> None:
    parts = join_parts({"workload": (_tally(3, 1.0),)}, {"workload": (_tally(4, 2.0),)})
    merged = merge_blocks(parts, _metrics())["workload"]
    assert merged == {
        "requests": 7,
        "exact_output": 7,
        "stopped_early": 7,
        "exact_input": 7,
        "prompt_tokens_reported": 7,
        "prompt_overhead_max": 3,
        "prompt_overhead_median_per_worker": [1.0, 2.0],
    }
    # One part (one process) is the tally itself, as workload.json always had it.
    assert merge_blocks({"workload": (_tally(3, 1.0),)}, _metrics())["workload"] == _tally(3, 1.0)


def test_the_agent_block_adds_every_workers_counters() -> None:
    a, b = AgentMetrics(), AgentMetrics()
    a.outcomes.update(Counter(completed=3, failed=1))
    b.outcomes.update(Counter(completed=2))
    merged = merge_blocks({"agent": (a.encode(), b.encode())}, _metrics())["agent"]
    assert isinstance(merged, dict)
    assert (merged["tasks"], merged["completed"], merged["failed"]) == (6, 5, 1)


def test_a_block_made_in_one_place_refuses_several_parts() -> None:
    server = {"samples": 1, "scraped": 1}
    with pytest.raises(UsageError, match=r"'server' failed to merge: 2 parts"):
        merge_blocks({"server": (server, server)}, _metrics())


def test_a_part_that_breaks_the_model_or_is_no_json_or_has_no_block_is_named() -> None:
    with pytest.raises(UsageError, match=r"'server' breaks its model.*\$\.samples"):
        merge_blocks({"server": ({"samples": "many", "scraped": 1},)}, _metrics())
    with pytest.raises(UsageError, match="'faults' is not JSON data"):
        merge_blocks({"faults": ([object()],)}, _metrics())
    with pytest.raises(UsageError, match="no summary block 'nothing' is installed"):
        merge_blocks({"nothing": ({},)}, _metrics())
