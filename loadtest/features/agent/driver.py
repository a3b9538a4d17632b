"""The glue between the runner and agent sessions: one task per unit of load.

The runner keeps scheduling (sessions, arrivals, bounds, stop); for an agent scenario
each unit it schedules is a task, run here: requests go through the runner's client
and its accounting (``requests.jsonl``, per-request metrics), tasks into ``tasks.jsonl``,
the agent metrics and ``trace.json``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from loadtest.datasets import Prompt
from loadtest.features.agent.session import TaskRecord, run_task
from loadtest.features.agent.task_metrics import AgentMetrics
from loadtest.features.agent.taskspec import AgentSpec, TaskPool
from loadtest.features.agent.tools import ToolRunner
from loadtest.features.agent.trace import TraceWriter
from loadtest.model.record import RequestRecord
from loadtest.model.summary import AgentBlock
from loadtest.protocol.openai import StreamReader, build_payload
from loadtest.report.atomic import LineLog

if TYPE_CHECKING:
    from loadtest.engine.runner import Runner

__all__ = ["AgentDriver"]


class AgentDriver:
    """Runs tasks for a runner; ``open``/``close`` around the run."""

    def __init__(self, spec: AgentSpec, tasks: TaskPool, seed: int = 0) -> None:
        self.spec = spec
        self.tasks = tasks
        self.metrics = AgentMetrics()
        self.tools = ToolRunner(spec, seed)
        self._requests = 0
        self._log: LineLog | None = None
        self._trace: TraceWriter | None = None

    async def open(self, run_dir: Path, t0_ns: int) -> None:
        """Open ``tasks.jsonl``, ``trace.json`` and the tool runner."""
        self._log = LineLog(run_dir / "tasks.jsonl")
        self._trace = TraceWriter(run_dir / "trace.json", t0_ns)
        await self.tools.__aenter__()

    async def close(self) -> None:
        """Close the files and the tool runner."""
        await self.tools.__aexit__()
        if self._log is not None:
            self._log.close()
        if self._trace is not None:
            self._trace.close()

    def flush(self) -> None:
        """Hand the lines written so far to the files (once a second, by the runner)."""
        if self._log is not None:
            self._log.flush()
        if self._trace is not None:
            self._trace.flush()

    async def run(self, runner: Runner, index: int, intended_ns: int) -> TaskRecord:
        """Run one drawn task as unit ``index`` of the load."""
        task = self.tasks.draw()
        warmup = runner.warming_up_at(intended_ns)
        client = runner.client

        async def ask(
            messages: list[dict[str, Any]], at_ns: int
        ) -> tuple[RequestRecord, StreamReader]:
            prompt = Prompt(
                id=task.id,
                source=task.source,
                category=task.category,
                messages=tuple(messages),
                tools=task.tools,
            )
            sc = runner.scenario
            body = build_payload(
                api="chat",
                model=runner.config.model,
                messages=messages,
                text=None,
                stream=sc.stream,
                max_tokens=sc.max_tokens,
                sampling=sc.sampling,
                tools=list(task.tools),
            )
            self._requests += 1
            rec, reader = await client.exchange(
                index=self._requests - 1,
                prompt=prompt,
                body=body,
                intended_ns=at_ns,
                warmup=warmup,
            )
            runner.account(rec, prompt, {"task": index})
            return rec, reader

        rec = await run_task(
            task,
            index=index,
            start_ns=intended_ns,
            warmup=warmup,
            spec=self.spec,
            ask=ask,
            run_tool=self.tools,
        )
        m = runner.metrics
        self.metrics.add(rec, [m.interval, m.category(rec.category)])
        assert self._log is not None
        assert self._trace is not None
        self._log.write(orjson.dumps(rec.to_json(runner.t0_ns)) + b"\n")
        self._trace.add(rec)
        return rec

    def summary(self, runner: Runner) -> AgentBlock:
        """The ``agent`` section of summary.json."""
        m = runner.metrics
        return self.metrics.summary(m.total, m.by_category, m.tool_stats)
