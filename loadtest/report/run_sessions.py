"""A finished run's requests, grouped back into the sessions that sent them.

``requests.jsonl`` has one line per request; the features that send several requests
per unit of load mark theirs: an ``agent-trace`` replay with ``trace_id`` and ``call``
(and the recorded gap and tool time before each call), a multi-turn conversation with
``conversation`` and ``turn``, an agent task with ``task``. Lines of one unit are one
session, in the order they were sent; a plain request is a session of its own. The
tools an agent task ran are in its ``trace.json`` (tool slices of the task's track);
an ``agent-trace`` replay waited its recorded tool time right after the previous
call's end, where the recording had it (``execute_tool`` spans before the agent's own
work). Times are ns from the run's start, as the lines have them in ms.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import orjson

from loadtest.errors import ResultFileError, UsageError
from loadtest.model.json import JsonObject
from loadtest.report.run_record import run_lines

__all__ = ["RunCall", "RunSession", "ToolRun", "run_sessions"]

SessionKind = Literal["agent-trace", "agent", "conversation", "request"]


@dataclass(frozen=True, slots=True)
class RunCall:
    """One request of a session, as its line has it (ns from the run's start)."""

    index: int
    prompt_id: str
    intended_ns: int
    sent_ns: int
    first_token_ns: int | None
    end_ns: int
    outcome: str
    error_class: str | None
    error: str | None
    warmup: bool
    prompt_tokens: int | None
    output_tokens: int
    finish_reason: str | None
    response_id: str | None
    settings: JsonObject
    messages: tuple[JsonObject, ...] | None


@dataclass(frozen=True, slots=True)
class ToolRun:
    """A tool's run between two calls; ``name`` empty where the run does not know it."""

    name: str
    start_ns: int
    end_ns: int


@dataclass(frozen=True, slots=True)
class RunSession:
    """The requests of one unit of load, in the order they were sent."""

    kind: SessionKind
    key: str
    """The recorded trace id, the conversation's or task's id, or the request's index."""
    unit: int
    calls: tuple[RunCall, ...]
    tools: tuple[ToolRun, ...]
    worker: int = 0
    """The worker that sent it (``--workers``): each numbers its units from 0, so two
    workers' unit 0 of one trace id are two sessions, not one of both's calls."""


def run_sessions(folder: Path) -> list[RunSession]:
    """The sessions of a run folder, in order of their first intended send (a --workers
    run killed before its merge: from its workers' lines, each tagged with its worker)."""
    files = run_lines(folder)
    rows: list[JsonObject] = []
    try:
        for file, worker in files:
            for r in file:
                if isinstance(r.get("intended_ms"), int | float):
                    rows.append(r if worker is None else {**r, "worker": worker})
    except ResultFileError as exc:
        raise UsageError(str(exc)) from exc
    if not rows:
        raise UsageError(f"{', '.join(str(f.path) for f, _ in files)}: no request to export")
    groups: dict[tuple[SessionKind, str, int, int], list[JsonObject]] = {}
    for r in rows:
        worker = r.get("worker")
        groups.setdefault((*_key(r), worker if isinstance(worker, int) else 0), []).append(r)
    task_tools = _task_tools(folder / "trace.json") if any(k[0] == "agent" for k in groups) else {}
    out = []
    for (kind, key, unit, worker), lines in groups.items():
        lines.sort(key=lambda r: (r["intended_ms"], r.get("index", 0)))
        calls = tuple(_call(r) for r in lines)
        if kind == "agent-trace":
            tools = _replayed_tools(lines, calls)
        else:
            tools = task_tools.get(unit, ()) if kind == "agent" else ()
        name = str(lines[0].get("prompt_id") or key) if kind == "agent" else key
        out.append(RunSession(kind, name, unit, calls, tools, worker))
    out.sort(key=lambda s: (s.calls[0].intended_ns, s.calls[0].index))
    return out


def _key(r: JsonObject) -> tuple[SessionKind, str, int]:
    unit = r.get("unit")
    if isinstance(r.get("trace_id"), str) and isinstance(unit, int):
        return "agent-trace", r["trace_id"], unit
    if isinstance(r.get("conversation"), str) and isinstance(unit, int):
        return "conversation", r["conversation"], unit
    if isinstance(r.get("task"), int):
        return "agent", str(r["task"]), r["task"]
    index = int(r.get("index", 0))
    return "request", str(index), index


def _ns(ms: object) -> int | None:
    return round(float(ms) * 1e6) if isinstance(ms, int | float) else None


def _call(r: JsonObject) -> RunCall:
    intended = _ns(r["intended_ms"]) or 0
    sent = _ns(r.get("sent_ms"))
    sent = intended if sent is None else sent
    end = _ns(r.get("end_ms"))
    messages = r.get("messages")
    settings = r.get("settings")
    return RunCall(
        index=int(r.get("index", 0)),
        prompt_id=str(r.get("prompt_id") or ""),
        intended_ns=intended,
        sent_ns=sent,
        first_token_ns=_ns(r.get("first_token_ms")),
        end_ns=sent if end is None else end,
        outcome=str(r.get("outcome") or "unknown"),
        error_class=_text(r.get("error_class")),
        error=_text(r.get("error")),
        warmup=bool(r.get("warmup")),
        prompt_tokens=r["prompt_tokens"] if isinstance(r.get("prompt_tokens"), int) else None,
        output_tokens=int(r.get("output_tokens") or 0),
        finish_reason=_text(r.get("finish_reason")),
        response_id=_text(r.get("response_id")),
        settings=settings if isinstance(settings, dict) else {},
        messages=tuple(messages) if isinstance(messages, list) and messages else None,
    )


def _text(v: object) -> str | None:
    return v if isinstance(v, str) and v else None


def _replayed_tools(lines: list[JsonObject], calls: tuple[RunCall, ...]) -> tuple[ToolRun, ...]:
    """The recorded tool time a replay waited before each call, from the previous end."""
    out = []
    for prev, line in zip(calls, lines[1:], strict=False):
        tool = _ns(line.get("tool_ms"))
        if tool:
            out.append(ToolRun("", prev.end_ns, prev.end_ns + tool))
    return tuple(out)


def _task_tools(path: Path) -> dict[int, tuple[ToolRun, ...]]:
    """Per task index, the tool slices of ``trace.json`` (µs from the run's start)."""
    if not path.exists():
        return {}
    raw = path.read_bytes().strip()
    # A killed run leaves the array open (the format allows it): close it to parse it.
    if raw and not raw.endswith(b"]"):
        raw += b"]"
    try:
        events = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{path}: not a trace event array ({exc})") from exc
    out: dict[int, list[ToolRun]] = {}
    for e in events if isinstance(events, list) else []:
        if isinstance(e, dict) and e.get("cat") == "tool" and e.get("ph") == "X":
            start = round(float(e["ts"]) * 1e3)
            run = ToolRun(str(e.get("name", "")), start, start + round(float(e["dur"]) * 1e3))
            out.setdefault(int(e["tid"]), []).append(run)
    return {k: tuple(v) for k, v in out.items()}
