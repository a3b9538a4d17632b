"""The glue between the engine and agent sessions: one task per unit of load.

The engine keeps scheduling (sessions, arrivals, bounds, stop); for an agent scenario
each unit it schedules is a task, run here (``AgentDriver`` is the run's
``UnitOfLoad`` and a ``RunHook``): requests go through the run's client and its
accounting (``requests.jsonl``, per-request metrics), tasks into ``tasks.jsonl``, the
agent metrics and ``trace.json``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from loadtest.engine.hooks import HookResult, RunContext, RunHook
from loadtest.features.agent.session import TaskRecord, run_task
from loadtest.features.agent.task_metrics import AgentMetrics
from loadtest.features.agent.taskspec import AgentSpec, TaskPool
from loadtest.features.agent.tools import ToolRunner
from loadtest.features.agent.trace import TraceWriter
from loadtest.model.atomic import LineLog
from loadtest.model.json import JsonObject
from loadtest.model.prompt import Prompt
from loadtest.model.record import RequestRecord
from loadtest.protocol.openai import StreamReader, build_payload

__all__ = ["AgentDriver"]


class AgentDriver(RunHook):
    """Runs a task per unit of load; opens its files when the run starts."""

    def __init__(self, spec: AgentSpec, tasks: TaskPool, seed: int = 0) -> None:
        self.spec = spec
        self.tasks = tasks
        self.metrics = AgentMetrics()
        self.tools = ToolRunner(spec, seed)
        self._requests = 0
        self._log: LineLog | None = None
        self._trace: TraceWriter | None = None
        self._ctx: RunContext | None = None
        self._open = False

    async def on_start(self, ctx: RunContext) -> None:
        """Open ``tasks.jsonl``, ``trace.json`` and the tool runner."""
        self._ctx = ctx
        self.tools.http = ctx.side_http
        await self.open(ctx.run_dir, ctx.t0_ns)

    async def on_finish(self) -> None:
        """Close the files and the tool runner."""
        await self.close()

    def on_tick(self, now_ns: int) -> None:
        """Hand the lines written in the second to the files."""
        self.flush()

    def result(self, run_dir: Path) -> HookResult:
        """This process's part of the ``agent`` block: its task counters and share
        histograms (``AgentMetrics.encode``), which the block adds over every worker and
        reads beside the run's merged metrics."""
        started = self._ctx is not None
        return HookResult(blocks={"agent": self.metrics.encode()} if started else {})

    async def open(self, run_dir: Path, t0_ns: int) -> None:
        """Open ``tasks.jsonl``, ``trace.json`` and the tool runner."""
        self._log = LineLog(run_dir / "tasks.jsonl")
        self._trace = TraceWriter(run_dir / "trace.json", t0_ns)
        await self.tools.__aenter__()
        self._open = True

    async def close(self) -> None:
        """Close the files and the tool runner."""
        if self._open:
            self._open = False
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

    async def run_unit(self, ctx: RunContext, index: int, intended_ns: int) -> float | None:
        """Unit ``index`` of the load: one task (``UnitOfLoad``); never a Retry-After."""
        await self.run(ctx, index, intended_ns)
        return None

    async def run(self, ctx: RunContext, index: int, intended_ns: int) -> TaskRecord:
        """Run one drawn task as unit ``index`` of the load.

        Cancelled from outside (the run's grace expired, the run was cancelled), the
        task still ends as a record in ``tasks.jsonl``; then the cancellation goes on.
        """
        task = self.tasks.draw()
        warmup = ctx.warming_up_at(intended_ns)
        client = ctx.client

        async def ask(messages: list[JsonObject], at_ns: int) -> tuple[RequestRecord, StreamReader]:
            prompt = Prompt(
                id=task.id,
                source=task.source,
                category=task.category,
                messages=tuple(messages),
                tools=task.tools,
            )
            sc = ctx.scenario
            body = build_payload(
                # Agents need tools: the completions API has none, so it runs as chat.
                api="responses" if sc.api == "responses" else "chat",
                model=ctx.model,
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
            ctx.account(rec, prompt, {"task": index})
            return rec, reader

        rec = await run_task(
            task,
            index=index,
            start_ns=intended_ns,
            warmup=warmup,
            spec=self.spec,
            ask=ask,
            run_tool=self.tools.for_session(),
        )
        m = ctx.metrics
        self.metrics.add(rec, [m.interval, m.category(rec.category)])
        assert self._log is not None
        assert self._trace is not None
        self._log.write(orjson.dumps(rec.to_json(ctx.t0_ns)) + b"\n")
        self._trace.add(rec)
        current = asyncio.current_task()
        if current is not None and current.cancelling():
            raise asyncio.CancelledError  # the task's record is written: now go on up
        return rec
