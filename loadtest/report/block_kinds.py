"""loadtest's own summary blocks, registered as a third party's are (``engine.blocks``).

In summary.json: ``faults`` (the fault windows' verdicts, judged once, on the merged
records, by the rig), ``server`` (the scraped ``/metrics``), ``agent`` (agent tasks,
added over the workers), ``agent_trace`` (replayed agent sessions). Files of their own,
written by the outputs below (``report.outputs``): ``multiturn`` (``multiturn.json``,
TTFT by turn from every worker's values) and ``workload`` (``workload.json``, the
exact-length tallies). Each is fed by the feature that owns it; none has a hook of its
own. What a block needs from a feature is imported where it is used: reading a summary
loads these objects for their models only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

from loadtest.engine.blocks import BlockBase
from loadtest.model.json import JsonObject
from loadtest.model.summary import AgentBlock, AgentTraceBlock, ServerBlock, Summary
from loadtest.model.verdict import FaultVerdict

if TYPE_CHECKING:
    from loadtest.features.agent_trace import ReplayPart
    from loadtest.measure.recorders import Metrics
    from loadtest.report.outputs import RunResults

__all__ = [
    "AGENT",
    "AGENT_TRACE",
    "FAULTS",
    "MULTITURN",
    "MULTITURN_FILE",
    "SERVER",
    "WORKLOAD",
    "WORKLOAD_FILE",
]


class _Faults(BlockBase):
    """One verdict per fault window: every part's, in order (the rig hands one list)."""

    model = list[FaultVerdict]
    empty: object = []

    def merge(self, parts: Sequence[list[FaultVerdict]], metrics: Metrics) -> list[FaultVerdict]:
        return [f for part in parts for f in part]

    def render(self, block: list[FaultVerdict], summary: Summary) -> str | None:
        from loadtest.report.table import render_faults

        return render_faults(block) if block else None


class _Server(BlockBase):
    """The scraped server, from the one process that scrapes it (the rig); null when the
    run scraped none. Printed inside the table (``report.server_lines``)."""

    model = ServerBlock | None
    empty: object = None


class _Agent(BlockBase):
    """Agent tasks: each process's task counters and share histograms added (exact),
    read beside the run's merged metrics (time to a valid call, task time)."""

    model = AgentBlock

    def merge(self, parts: Sequence[JsonObject], metrics: Metrics) -> AgentBlock:
        from loadtest.features.agent.task_metrics import AgentMetrics

        merged = AgentMetrics()
        for part in parts:
            merged.add_encoded(part)
        return merged.summary(metrics.total, metrics.by_category, metrics.tool_stats)

    def render(self, block: AgentBlock, summary: Summary) -> str | None:
        from loadtest.report.run_notes import served_by_simulator
        from loadtest.report.table import render_agent

        return render_agent(block, simulated=served_by_simulator(summary))


class _AgentTrace(BlockBase):
    """Replayed agent sessions: each process's tally of its sessions added (exact), the
    shares computed once on the sums."""

    model = AgentTraceBlock

    def merge(self, parts: Sequence[ReplayPart], metrics: Metrics) -> AgentTraceBlock:
        from loadtest.features.agent_trace import merge_replays

        return merge_replays(parts)

    def render(self, block: AgentTraceBlock, summary: Summary) -> str | None:
        from loadtest.report.agent_trace_render import render_agent_trace

        return render_agent_trace(block)


class _MultiTurn(BlockBase):
    """``multiturn.json``: TTFT by turn and conversation times, from every process's
    measured values together (percentiles of parts do not add; their values do)."""

    model = JsonObject
    in_summary = False

    def merge(self, parts: Sequence[JsonObject], metrics: Metrics) -> JsonObject:
        from loadtest.features.multiturn import multiturn_block

        return multiturn_block(parts)


class _Workload(BlockBase):
    """``workload.json``: how close the lengths that came out were to those asked for."""

    model = JsonObject
    in_summary = False

    def merge(self, parts: Sequence[JsonObject], metrics: Metrics) -> JsonObject:
        from loadtest.features.workload import merge_lengths

        return merge_lengths(parts)


@dataclass(frozen=True, slots=True)
class BlockFile:
    """An output plugin (``report.outputs``): a block that is a file of its own, written
    where the run had the block, indented as its feature always wrote it."""

    block: str
    name: str
    made_from: frozenset[str] = frozenset({"blocks"})

    def render(self, results: RunResults) -> Iterator[tuple[str, bytes]]:
        if self.block in results.blocks:
            yield self.name, orjson.dumps(results.blocks[self.block], option=orjson.OPT_INDENT_2)


FAULTS = _Faults()
SERVER = _Server()
AGENT = _Agent()
AGENT_TRACE = _AgentTrace()
MULTITURN = _MultiTurn()
WORKLOAD = _Workload()
MULTITURN_FILE = BlockFile("multiturn", "multiturn.json")
WORKLOAD_FILE = BlockFile("workload", "workload.json")
