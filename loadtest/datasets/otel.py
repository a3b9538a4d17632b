"""Agent sessions from OpenTelemetry GenAI traces (OTLP JSON), as they were recorded.

The file holds OTLP JSON documents (``resourceSpans -> scopeSpans -> spans``): one a
line as the Collector's file exporter and the SDK's OTLP JSON file exporter write them,
or one document for the whole file. A trace is a session. Its model calls are the
spans with ``gen_ai.operation.name = "chat"``, its tool runs those with
``execute_tool``; ``invoke_agent`` spans nest them. Calls in a session must not overlap
(the one before a call is the one whose answer it waited for), each carries
``gen_ai.usage.input_tokens``/``output_tokens``, and every parent is in the trace: a
trace that breaks one of these is an error naming the file, the trace and the span. A
call that failed (status ERROR) without token counts is not replayed: its time stays
in the gap before the next call.

Between two calls lies the session's non-model time: what of it ``execute_tool`` spans
cover is tool time, the rest the agent's own work. A replay keeps both.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from loadtest.errors import DatasetError
from loadtest.model.json import JsonObject

__all__ = ["SETTING_ATTRIBUTES", "RecordedCall", "RecordedSession", "read_agent_trace"]

SETTING_ATTRIBUTES = {
    "gen_ai.request.temperature": "temperature",
    "gen_ai.request.top_p": "top_p",
    "gen_ai.request.frequency_penalty": "frequency_penalty",
    "gen_ai.request.presence_penalty": "presence_penalty",
    "gen_ai.request.seed": "seed",
    "gen_ai.request.stop_sequences": "stop",
}
"""GenAI request attributes and the body fields they were (``max_tokens`` is not
taken: a replay asks for the recorded output length exactly)."""


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """One model call of a session, as the trace has it."""

    span_id: str
    name: str
    start_ns: int
    """From the session's first call's start."""
    end_ns: int
    input_tokens: int
    output_tokens: int
    settings: JsonObject
    """Request settings as body fields (temperature, top_p, seed...)."""
    messages: tuple[JsonObject, ...] | None
    """The chat messages sent, where the trace captured them (``gen_ai.input.messages``)."""
    gap_ns: int
    """Non-model time before this call: since the previous call's end (0 for the first)."""
    tool_ns: int
    """Of ``gap_ns``, the time ``execute_tool`` spans cover."""


@dataclass(frozen=True, slots=True)
class RecordedSession:
    """One trace: its model calls in order, and when it started."""

    trace_id: str
    offset_ns: int
    """When its first call started, from the first session's first call."""
    calls: tuple[RecordedCall, ...]
    tools: int
    """``execute_tool`` spans in the trace."""

    @property
    def session_ns(self) -> int:
        """From the first call's start to the last call's end."""
        return self.calls[-1].end_ns

    @property
    def model_ns(self) -> int:
        """Time inside model calls."""
        return sum(c.end_ns - c.start_ns for c in self.calls)

    @property
    def tool_ns(self) -> int:
        """Tool time between calls."""
        return sum(c.tool_ns for c in self.calls)


@dataclass(frozen=True, slots=True)
class _Span:
    trace_id: str
    span_id: str
    parent: str | None
    name: str
    start_ns: int
    end_ns: int
    attrs: dict[str, Any]
    failed: bool
    """Status ERROR: a call that failed (a replay skips it when it has no usage)."""

    @property
    def operation(self) -> str:
        op = self.attrs.get("gen_ai.operation.name")
        if isinstance(op, str):
            return op
        return self.name.split(" ", 1)[0]


def read_agent_trace(path: Path, limit: int | None = None) -> list[RecordedSession]:
    """The sessions of an OTLP JSON file, in order of their start."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the trace ({exc.strerror})") from exc
    by_trace: dict[str, list[_Span]] = {}
    for span in _spans(raw, path):
        by_trace.setdefault(span.trace_id, []).append(span)
    sessions = [_session(path, tid, spans) for tid, spans in by_trace.items()]
    found = [s for s in sessions if s is not None]
    if not found:
        raise DatasetError(f"{path}: no trace holds a chat span (gen_ai.operation.name = chat)")
    found.sort(key=lambda s: s[0])
    first = found[0][0]
    out = [RecordedSession(s.trace_id, start - first, s.calls, s.tools) for start, s in found]
    return out[:limit] if limit is not None else out


def _documents(raw: bytes, path: Path) -> Iterator[tuple[str, Any]]:
    lines = [(n, line) for n, line in enumerate(raw.splitlines(), start=1) if line.strip()]
    try:
        docs = [(f"{path}:{n}", orjson.loads(line)) for n, line in lines]
    except orjson.JSONDecodeError:
        # Not one document a line: one pretty-printed document for the whole file.
        try:
            docs = [(str(path), orjson.loads(raw))]
        except orjson.JSONDecodeError as exc:
            raise DatasetError(f"{path}: not OTLP JSON ({exc})") from exc
    yield from docs


def _spans(raw: bytes, path: Path) -> Iterator[_Span]:
    for where, doc in _documents(raw, path):
        if not isinstance(doc, dict) or not isinstance(doc.get("resourceSpans"), list):
            raise DatasetError(f"{where}: expected an OTLP JSON object with 'resourceSpans'")
        for rs in doc["resourceSpans"]:
            for ss in _list(rs, "scopeSpans", where):
                for s in _list(ss, "spans", where):
                    yield _span(s, where)


def _list(obj: Any, key: str, where: str) -> list[Any]:
    v = obj.get(key, []) if isinstance(obj, dict) else None
    if not isinstance(v, list):
        raise DatasetError(f"{where}: {key!r} must be a list")
    return v


def _span(s: Any, where: str) -> _Span:
    if not isinstance(s, dict):
        raise DatasetError(f"{where}: a span must be an object")
    tid, sid = s.get("traceId"), s.get("spanId")
    if not (isinstance(tid, str) and tid and isinstance(sid, str) and sid):
        raise DatasetError(f"{where}: a span without traceId or spanId")
    name = str(s.get("name", ""))
    here = f"{where}: trace {tid}, span {sid} ({name})"
    try:
        start, end = int(s["startTimeUnixNano"]), int(s["endTimeUnixNano"])
    except (KeyError, TypeError, ValueError) as exc:
        raise DatasetError(f"{here}: start/endTimeUnixNano must be integers") from exc
    if end < start:
        raise DatasetError(f"{here}: ends before it starts")
    attrs = {a["key"]: _value(a.get("value")) for a in s.get("attributes", []) if "key" in a}
    status = s.get("status")
    failed = isinstance(status, dict) and status.get("code") in (2, "STATUS_CODE_ERROR")
    return _Span(tid, sid, s.get("parentSpanId") or None, name, start, end, attrs, failed)


def _value(v: Any) -> Any:
    """An OTLP ``AnyValue`` as Python (int64s come as strings in OTLP JSON)."""
    if not isinstance(v, dict):
        return None
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_value(x) for x in v["arrayValue"].get("values", [])]
    return None


@dataclass(frozen=True, slots=True)
class _Parsed:
    trace_id: str
    calls: tuple[RecordedCall, ...]
    tools: int


def _session(path: Path, tid: str, spans: list[_Span]) -> tuple[int, _Parsed] | None:
    ids = {s.span_id for s in spans}
    for s in spans:
        if s.parent is not None and s.parent not in ids:
            raise DatasetError(
                f"{path}: trace {tid}, span {s.span_id} ({s.name}): its parent "
                f"{s.parent} is not in the trace"
            )
    # A failed call without usage cannot be replayed as it was: its time stays in the
    # gap before the next call, as non-model time.
    chats = sorted(
        (s for s in spans if s.operation == "chat" and not (s.failed and _no_usage(s))),
        key=lambda s: s.start_ns,
    )
    if not chats:
        return None
    tools = [s for s in spans if s.operation == "execute_tool"]
    t0 = chats[0].start_ns
    calls = []
    prev: _Span | None = None
    for s in chats:
        here = f"{path}: trace {tid}, span {s.span_id} ({s.name})"
        if prev is not None and s.start_ns < prev.end_ns:
            raise DatasetError(
                f"{here}: starts before the call {prev.span_id} ended (overlapping calls "
                f"in one session: which answer it waited for cannot be told)"
            )
        n_in = s.attrs.get("gen_ai.usage.input_tokens")
        n_out = s.attrs.get("gen_ai.usage.output_tokens")
        if not (isinstance(n_in, int) and n_in > 0 and isinstance(n_out, int) and n_out > 0):
            raise DatasetError(
                f"{here}: no token counts (gen_ai.usage.input_tokens and output_tokens "
                f"must be integers >= 1, got {n_in!r} and {n_out!r})"
            )
        gap_from = prev.end_ns if prev is not None else s.start_ns
        calls.append(
            RecordedCall(
                span_id=s.span_id,
                name=s.name,
                start_ns=s.start_ns - t0,
                end_ns=s.end_ns - t0,
                input_tokens=n_in,
                output_tokens=n_out,
                settings={
                    body: s.attrs[attr]
                    for attr, body in SETTING_ATTRIBUTES.items()
                    if attr in s.attrs
                },
                messages=_messages(s.attrs.get("gen_ai.input.messages"), here),
                gap_ns=s.start_ns - gap_from,
                tool_ns=_covered(tools, gap_from, s.start_ns),
            )
        )
        prev = s
    return t0, _Parsed(tid, tuple(calls), len(tools))


def _no_usage(s: _Span) -> bool:
    return not isinstance(s.attrs.get("gen_ai.usage.output_tokens"), int)


def _covered(spans: list[_Span], lo: int, hi: int) -> int:
    """How much of ``[lo, hi)`` the spans cover (parallel tools counted once)."""
    cuts = sorted((max(s.start_ns, lo), min(s.end_ns, hi)) for s in spans)
    total, reach = 0, lo
    for a, b in cuts:
        a = max(a, reach)
        if b > a:
            total += b - a
            reach = b
    return total


def _messages(raw: Any, here: str) -> tuple[JsonObject, ...] | None:
    """``gen_ai.input.messages`` (GenAI parts) as OpenAI chat messages."""
    if raw is None:
        return None
    try:
        msgs = orjson.loads(raw) if isinstance(raw, str) else raw
    except orjson.JSONDecodeError as exc:
        raise DatasetError(f"{here}: gen_ai.input.messages is not JSON ({exc})") from exc
    if not (isinstance(msgs, list) and msgs and all(isinstance(m, dict) for m in msgs)):
        raise DatasetError(f"{here}: gen_ai.input.messages must be a non-empty list of objects")
    out: list[JsonObject] = []
    for m in msgs:
        out += _chat_messages(m)
    return tuple(out)


def _chat_messages(m: dict[str, Any]) -> list[JsonObject]:
    role = str(m.get("role", "user"))
    parts = m.get("parts")
    if not isinstance(parts, list):  # already a chat message (older conventions)
        return [dict(m)]
    text = "".join(str(p.get("content", "")) for p in parts if p.get("type") == "text")
    calls = [
        {
            "id": str(p.get("id", "")),
            "type": "function",
            "function": {"name": str(p.get("name", "")), "arguments": _json(p.get("arguments"))},
        }
        for p in parts
        if p.get("type") == "tool_call"
    ]
    answers = [p for p in parts if p.get("type") == "tool_call_response"]
    if answers:
        return [
            {
                "role": "tool",
                "tool_call_id": str(p.get("id", "")),
                "content": _json(p.get("response")),
            }
            for p in answers
        ]
    msg: JsonObject = {"role": role, "content": text or None}
    if calls:
        msg["tool_calls"] = calls
    elif msg["content"] is None:
        msg["content"] = ""
    return [msg]


def _json(v: Any) -> str:
    return v if isinstance(v, str) else orjson.dumps(v).decode()
