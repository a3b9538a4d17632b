"""One agent task, step by step: ask, validate, retry, run the tool, ask again.

The session does no I/O itself: ``ask`` sends one request (the runner's client, which
also accounts for it) and ``run_tool`` answers one tool call. So the logic here, and the
spans it records, are the same whatever serves the requests, and whichever API: the
history is kept as chat messages, which the payload maps to the API's shape (input items
for the Responses API: ``protocol.items``), and the answer is read through the reader's
API-neutral ``tool_calls`` and ``text``.

Spans partition the task's time with no gap: for each request, ``queue`` (intended to
sent), ``network`` (sent to the first byte: connection, upload, prefill and queueing in
the server), ``reasoning`` (for a model that reasoned: the first byte to its first
answer token, #47), ``generation`` (to the end of the response: the call itself),
``validation`` (the end to when loadtest had judged it); then ``tool`` for each tool
call. A request
whose call was invalid and re-asked has its spans in the ``retry`` part. The parts
therefore add up to the task time exactly.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypedDict

import orjson

from loadtest.features.agent.tasks import Task
from loadtest.features.agent.taskspec import AgentSpec
from loadtest.model.json import JsonObject
from loadtest.model.record import RequestRecord
from loadtest.protocol.openai import StreamReader, ToolCall

__all__ = ["PARTS", "Span", "TaskLine", "TaskRecord", "ToolError", "run_task"]

PARTS = ("queue", "network", "reasoning", "generation", "validation", "retry", "tool")
_perf = time.perf_counter_ns

Ask = Callable[[list[JsonObject], int], Awaitable[tuple[RequestRecord, StreamReader]]]
"""Sends the conversation so far (chat messages; the payload maps them to the API's
shape) at an intended time; returns the record and the reader of the answer."""
RunTool = Callable[[ToolCall, "str | None"], Awaitable[str]]


class ToolError(Exception):
    """A tool call could not be executed (its URL failed); the task fails as ``tool``."""


class TaskLine(TypedDict):
    """One line of ``tasks.jsonl`` (times in ms from the run's start)."""

    index: int
    task_id: str
    source: str
    category: str
    warmup: bool
    outcome: str
    error_class: str | None
    error: str | None
    start_ms: float
    task_ms: float
    turns: int
    steps: int
    requests: int
    retries: int
    valid_call_ms: list[float]
    expected_matched: int
    expected_total: int
    shares: dict[str, float]


@dataclass(frozen=True, slots=True)
class Span:
    """One part of a task's time."""

    part: str
    name: str
    start_ns: int
    end_ns: int
    step: int
    attempt: int = 0


@dataclass(slots=True)
class TaskRecord:
    """What happened to one task."""

    index: int
    task_id: str
    source: str
    category: str
    warmup: bool
    start_ns: int
    end_ns: int = 0
    outcome: str = "completed"
    """``completed``, ``failed``, ``step_limit`` or ``cancelled``."""
    error_class: str | None = None
    error: str | None = None
    turns: int = 0
    steps: int = 0
    requests: int = 0
    retries: int = 0
    valid_call_ns: list[int] = field(default_factory=list)
    """Per step that produced a valid call: step start to the completing chunk."""
    expected_matched: int = 0
    expected_total: int = 0
    spans: list[Span] = field(default_factory=list)

    @property
    def task_ns(self) -> int:
        """Task time: its intended start to its end."""
        return self.end_ns - self.start_ns

    def shares(self) -> dict[str, float]:
        """Share of the task time in each part (they add up to 1)."""
        total = sum(s.end_ns - s.start_ns for s in self.spans) or 1
        out = dict.fromkeys(PARTS, 0.0)
        for s in self.spans:
            out[s.part] += (s.end_ns - s.start_ns) / total
        return out

    def to_json(self, t0_ns: int) -> TaskLine:
        """A JSON-ready line of ``tasks.jsonl`` (times in ms from the run's start)."""
        return {
            "index": self.index,
            "task_id": self.task_id,
            "source": self.source,
            "category": self.category,
            "warmup": self.warmup,
            "outcome": self.outcome,
            "error_class": self.error_class,
            "error": self.error,
            "start_ms": round((self.start_ns - t0_ns) / 1e6, 3),
            "task_ms": round(self.task_ns / 1e6, 3),
            "turns": self.turns,
            "steps": self.steps,
            "requests": self.requests,
            "retries": self.retries,
            "valid_call_ms": [round(v / 1e6, 3) for v in self.valid_call_ns],
            "expected_matched": self.expected_matched,
            "expected_total": self.expected_total,
            "shares": {k: round(v, 4) for k, v in self.shares().items()},
        }


def _request_spans(rec: RequestRecord, judged_ns: int, step: int, attempt: int) -> list[Span]:
    first = rec.first_byte_ns if rec.first_byte_ns is not None else rec.end_ns
    edges = [rec.intended_ns, rec.sent_ns, first, rec.end_ns, judged_ns]
    names: tuple[str, ...] = ("queue", "network", "generation", "validation")
    answer = rec.reasoning.answer_ns if rec.reasoning is not None else None
    if answer is not None and first <= answer <= rec.end_ns:
        edges = [rec.intended_ns, rec.sent_ns, first, answer, rec.end_ns, judged_ns]
        names = ("queue", "network", "reasoning", "generation", "validation")
    return [
        Span(name, name, a, max(a, b), step, attempt)
        for name, a, b in zip(names, edges, edges[1:], strict=False)
    ]


def _assistant(reader: StreamReader, step: int) -> JsonObject:
    calls = [
        {
            "id": c.id or f"call_{step}_{c.index}",
            "type": "function",
            "function": {"name": c.name, "arguments": c.arguments},
        }
        for c in reader.tool_calls
    ]
    msg: JsonObject = {"role": "assistant", "content": reader.text or None}
    if calls:
        msg["tool_calls"] = calls
    return msg


async def run_task(
    task: Task,
    *,
    index: int,
    start_ns: int,
    warmup: bool,
    spec: AgentSpec,
    ask: Ask,
    run_tool: RunTool,
) -> TaskRecord:
    """Run ``task`` to its end; returns its record (never raises but for cancellation)."""
    rec_t = TaskRecord(index, task.id, task.source, task.category, warmup, start_ns)
    messages: list[JsonObject] = list(task.system)
    t = start_ns
    try:
        for turn_i, turn in enumerate(task.turns):
            rec_t.turns += 1
            messages += list(turn)
            expected = task.expected[turn_i] if task.expected else ()
            results = list(task.results[turn_i]) if task.results else []
            rec_t.expected_total += len(expected)
            exp_pos = 0
            while True:
                if rec_t.steps >= spec.max_steps:
                    rec_t.outcome = "step_limit"
                    rec_t.error = f"no answer within {spec.max_steps} steps"
                    return rec_t
                rec_t.steps += 1
                step_start, attempt = t, 0
                while True:
                    rec, reader = await ask(messages, t)
                    judged = _perf()
                    rec_t.requests += 1
                    spans = _request_spans(rec, judged, rec_t.steps, attempt)
                    t = judged
                    if rec.outcome == "ok":
                        rec_t.spans += spans
                        break
                    if rec.error_class == "invalid_output" and attempt < spec.max_retries:
                        # As agent frameworks do: show the model its error and ask again.
                        rec_t.spans += [
                            Span("retry", s.name, s.start_ns, s.end_ns, s.step, attempt)
                            for s in spans
                        ]
                        attempt += 1
                        rec_t.retries += 1
                        messages += _rejected(reader, rec.error or "invalid call", rec_t.steps)
                        continue
                    rec_t.spans += spans
                    rec_t.outcome = "cancelled" if rec.outcome == "cancelled" else "failed"
                    rec_t.error_class, rec_t.error = rec.error_class, rec.error
                    return rec_t
                calls = reader.tool_calls
                messages.append(_assistant(reader, rec_t.steps))
                if not calls:
                    break  # an answer: the turn is done
                if rec.tool_call_ns is not None:
                    rec_t.valid_call_ns.append(rec.tool_call_ns - step_start)
                for call, msg in zip(calls, messages[-1]["tool_calls"], strict=True):
                    if exp_pos < len(expected):
                        rec_t.expected_matched += call.name == expected[exp_pos]
                        exp_pos += 1
                    recorded = results.pop(0) if results else None
                    tool_start = t
                    try:
                        result = await run_tool(call, recorded)
                    except ToolError as exc:
                        t = _perf()
                        rec_t.spans.append(Span("tool", call.name, tool_start, t, rec_t.steps))
                        rec_t.outcome, rec_t.error_class = "failed", "tool"
                        rec_t.error = f"tool {call.name}: {exc}"
                        return rec_t
                    t = _perf()
                    rec_t.spans.append(Span("tool", call.name, tool_start, t, rec_t.steps))
                    messages.append({"role": "tool", "tool_call_id": msg["id"], "content": result})
        return rec_t
    except asyncio.CancelledError:
        # Stopped between requests (during a tool call): the task is accounted as such;
        # the driver writes its record and then lets the cancellation go on.
        rec_t.outcome, rec_t.error = "cancelled", "stopped during a tool call"
        t = _perf()
        return rec_t
    finally:
        rec_t.end_ns = t


def _rejected(reader: StreamReader, problem: str, step: int) -> list[JsonObject]:
    assistant = _assistant(reader, step)
    calls = assistant.get("tool_calls") or []
    note = f"Error: {problem}. Call the function again with valid arguments."
    if not calls:
        return [assistant, {"role": "user", "content": note}]
    return [assistant] + [
        {"role": "tool", "tool_call_id": c["id"], "content": orjson.dumps({"error": note}).decode()}
        for c in calls
    ]
