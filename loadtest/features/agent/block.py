"""The ``agent`` summary block: each process's task counters and share histograms added
(exact), read beside the run's merged metrics, and its rendering for the run's table."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from loadtest.engine.block_text import fit, packed
from loadtest.engine.blocks import BlockBase
from loadtest.features.server_summary import served_by_simulator
from loadtest.model.json import JsonObject
from loadtest.model.summary import AgentBlock, Summary

if TYPE_CHECKING:
    from loadtest.measure.recorders import Metrics

__all__ = ["AGENT", "render_agent"]


_SIMULATED = "not shown, the simulator calls at random"
"""In place of a share of tool calls matching the expected ones, against the simulator."""


def render_agent(agent: AgentBlock, *, simulated: bool = False) -> str:
    """Task outcomes, steps, retries and where task time went, as text.

    ``simulated``: the built-in simulator served the run; it calls tools at random, so a
    share of calls matching the expected ones is chance and is not shown.
    """
    rate = agent["completion_rate"]
    done = f"{agent['completed']} completed" + (f" ({rate:.0%})" if rate is not None else "")
    outcomes = [
        f"agent tasks: {agent['tasks']} ended",
        done,
        f"{agent['failed']} failed",
        f"{agent['step_limit']} hit the step limit",
        f"{agent['cancelled']} cancelled",
    ]
    lines = packed(outcomes, ", ")
    if agent["errors"]:
        lines.append("  errors: " + ", ".join(f"{k} {v}" for k, v in agent["errors"].items()))
    steps, retries = agent["steps"], agent["retries"]
    if steps["count"]:
        lines.append(
            f"steps per task: mean {steps.get('mean', 0):.1f}  max {steps.get('max', 0):.0f}   "
            f"retries per task: mean {retries.get('mean', 0):.2f}  "
            f"max {retries.get('max', 0):.0f}"
        )
    validity, expected = agent["validity_rate"], agent["expected_match_rate"]
    if validity is not None:
        lines.append(f"valid calls: {validity:.1%} of responses with calls")
    if expected is not None:
        lines.append(
            f"calls matching the expected function: {_SIMULATED}"
            if simulated
            else f"calls matching the expected function: {expected:.1%}"
        )
    shares = agent["time_shares"]
    if shares:
        lines += packed(
            ["share of task time (p50/p95):"]
            + [
                f"{p} {v.get('p50', 0):.1%}/{v.get('p95', 0):.1%}"
                for p, v in shares.items()
                if p != "reasoning" or v.get("p95", 0) > 0  # a model that never reasoned
            ]
        )
    return fit(lines)


class _Agent(BlockBase):
    """Agent tasks: each process's task counters and share histograms added (exact),
    read beside the run's merged metrics (time to a valid call, task time)."""

    model = AgentBlock

    def merge(self, parts: Sequence[JsonObject], metrics: Metrics) -> AgentBlock:
        # Here, not at the top: reading a summary loads the block for its model only.
        from loadtest.features.agent.task_metrics import AgentMetrics

        merged = AgentMetrics()
        for part in parts:
            merged.add_encoded(part)
        return merged.summary(metrics.total, metrics.by_category, metrics.tool_stats)

    def render(self, block: AgentBlock, summary: Summary) -> str | None:
        return render_agent(block, simulated=served_by_simulator(summary))


AGENT = _Agent()
