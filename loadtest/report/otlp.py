"""A run's sessions as OpenTelemetry GenAI spans, in OTLP JSON.

The shape is the one the OpenTelemetry SDK's OTLP JSON file exporter writes (and the
Collector's file exporter): one ``{"resourceSpans": [...]}`` document a line, ids in
hex, 64-bit integers (times, token counts) as strings, attributes as ``AnyValue``s.
Jaeger, Tempo and any OTLP tool read it, and so does loadtest's ``agent-trace`` source.

A session is one trace: an ``invoke_agent`` span from its first call's intended send to
its end, holding a ``chat {model}`` span per request (from its intended send, when the
agent wanted it, to its last byte: a client's queue is part of what the agent waited)
with the GenAI attributes (``gen_ai.usage.*``, the request settings, the finish reason,
``gen_ai.input.messages`` where the run recorded its prompts) and an ``execute_tool``
span per tool run where the run knows it. A plain request is a trace of one ``chat``
span. What GenAI has no attribute for (time to first token, the outcome, warm-up) is
under ``loadtest.*``. Ids are derived from the run and the session, so exporting a run
twice writes the same file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

import orjson

from loadtest.datasets.otel import SETTING_ATTRIBUTES
from loadtest.model.json import JsonObject
from loadtest.report.run_sessions import RunCall, RunSession

__all__ = ["ExportHead", "otlp_documents"]

_CLIENT, _INTERNAL = 3, 1
"""OTLP span kinds: a model call is a client span, agent and tool spans internal."""
_ERROR = 2
"""OTLP status code of a span that failed."""
_BODY_TO_ATTRIBUTE = {body: attr for attr, body in SETTING_ATTRIBUTES.items()}

Scalar = str | bool | int | float
AttrValue = Scalar | list[str]


@dataclass(frozen=True, slots=True)
class ExportHead:
    """What the spans say of the run as a whole."""

    run_id: str
    model: str
    endpoint: str
    agent: str
    """The scenario's name: the agent of every ``invoke_agent`` span."""
    start_unix_ns: int
    """The run's start (its ns 0) in Unix time."""
    version: str


def otlp_documents(sessions: Sequence[RunSession], head: ExportHead) -> list[JsonObject]:
    """One OTLP JSON document per session (a line of the export), in session order."""
    resource = {
        "attributes": _attrs(
            {
                "service.name": "loadtest",
                "service.version": head.version,
                "loadtest.run.id": head.run_id,
            }
        )
    }
    scope = {"name": "loadtest", "version": head.version}
    return [
        {
            "resourceSpans": [
                {
                    "resource": resource,
                    "scopeSpans": [{"scope": scope, "spans": _session_spans(s, head)}],
                }
            ]
        }
        for s in sessions
    ]


def _id(text: str, size: int) -> str:
    return hashlib.blake2b(text.encode(), digest_size=size).hexdigest()


def _session_spans(s: RunSession, head: ExportHead) -> list[JsonObject]:
    key = f"{head.run_id}/{s.kind}/{s.key}/{s.unit}" + (f"/w{s.worker}" if s.worker else "")
    trace_id = _id(key, 16)
    spans: list[JsonObject] = []
    parent: str | None = None
    if s.kind != "request":
        parent = _id(f"{key}/agent", 8)
        end = max([c.end_ns for c in s.calls] + [t.end_ns for t in s.tools])
        agent: dict[str, AttrValue] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": head.agent,
            "loadtest.session.kind": s.kind,
            "loadtest.session.key": s.key,
            "loadtest.session.unit": s.unit,
            "loadtest.session.worker": s.worker,
        }
        spans.append(
            _span(
                trace_id,
                parent,
                None,
                f"invoke_agent {head.agent}",
                _INTERNAL,
                (head.start_unix_ns + s.calls[0].intended_ns, head.start_unix_ns + end),
                agent,
            )
        )
    for n, c in enumerate(s.calls):
        spans.append(_chat(trace_id, _id(f"{key}/call/{n}", 8), parent, c, head))
    for n, t in enumerate(s.tools):
        tool: dict[str, AttrValue] = {"gen_ai.operation.name": "execute_tool"}
        if t.name:
            tool["gen_ai.tool.name"] = t.name
        spans.append(
            _span(
                trace_id,
                _id(f"{key}/tool/{n}", 8),
                parent,
                f"execute_tool {t.name}".rstrip(),
                _INTERNAL,
                (head.start_unix_ns + t.start_ns, head.start_unix_ns + t.end_ns),
                tool,
            )
        )
    return spans


def _chat(
    trace_id: str, span_id: str, parent: str | None, c: RunCall, head: ExportHead
) -> JsonObject:
    attrs: dict[str, AttrValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": head.model,
        "gen_ai.provider.name": "openai",
    }
    for body, value in c.settings.items():
        attr = _BODY_TO_ATTRIBUTE.get(body)
        if attr is not None and isinstance(value, str | bool | int | float | list):
            attrs[attr] = [str(v) for v in value] if isinstance(value, list) else value
    url = urlsplit(head.endpoint)
    # What the call did not have is left out: no count is written as a 0 (a failed call
    # without usage has no usage attributes).
    known: dict[str, AttrValue | None] = {
        "gen_ai.response.finish_reasons": [c.finish_reason] if c.finish_reason else None,
        "gen_ai.response.id": c.response_id,
        "gen_ai.usage.input_tokens": c.prompt_tokens or None,
        "gen_ai.usage.output_tokens": c.output_tokens or None,
        "gen_ai.input.messages": None
        if c.messages is None
        else orjson.dumps([_genai(m) for m in c.messages]).decode(),
        "server.address": url.hostname,
        "server.port": url.port if url.hostname else None,
        "error.type": c.error_class,
    }
    attrs.update({k: v for k, v in known.items() if v is not None})
    if c.first_token_ns is not None:
        attrs["loadtest.ttft_ms"] = round((c.first_token_ns - c.sent_ns) / 1e6, 3)
    attrs["loadtest.dispatch_lag_ms"] = round((c.sent_ns - c.intended_ns) / 1e6, 3)
    attrs["loadtest.outcome"] = c.outcome
    attrs["loadtest.warmup"] = c.warmup
    attrs["loadtest.request.index"] = c.index
    span = _span(
        trace_id,
        span_id,
        parent,
        f"chat {head.model}",
        _CLIENT,
        (head.start_unix_ns + c.intended_ns, head.start_unix_ns + c.end_ns),
        attrs,
    )
    if c.outcome != "ok":
        span["status"] = {"code": _ERROR, "message": c.error or c.outcome}
    return span


def _span(
    trace_id: str,
    span_id: str,
    parent: str | None,
    name: str,
    kind: int,
    times: tuple[int, int],
    attrs: dict[str, AttrValue],
) -> JsonObject:
    span: JsonObject = {"traceId": trace_id, "spanId": span_id}
    if parent is not None and parent != span_id:
        span["parentSpanId"] = parent
    span.update(
        {
            "name": name,
            "kind": kind,
            "startTimeUnixNano": str(times[0]),
            "endTimeUnixNano": str(max(times)),
            "attributes": _attrs(attrs),
            "status": {},
        }
    )
    return span


def _attrs(attrs: dict[str, AttrValue]) -> list[JsonObject]:
    return [{"key": k, "value": _any(v)} for k, v in attrs.items()]


def _any(v: AttrValue) -> JsonObject:
    """A value as an OTLP ``AnyValue`` (int64 as a string, as the proto JSON mapping has it)."""
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    if isinstance(v, list):
        return {"arrayValue": {"values": [{"stringValue": x} for x in v]}}
    return {"stringValue": v}


def _genai(m: JsonObject) -> JsonObject:
    """A chat message as GenAI message parts (what ``datasets.otel`` reads back)."""
    role = str(m.get("role", "user"))
    if role == "tool":
        part = {"type": "tool_call_response", "id": m.get("tool_call_id", ""), "response": ""}
        part["response"] = m.get("content") or ""
        return {"role": role, "parts": [part]}
    parts: list[JsonObject] = []
    content = m.get("content")
    if isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        text = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        parts.append({"type": "text", "content": text})
    for call in m.get("tool_calls") or []:
        fn = call.get("function", {})
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id", ""),
                "name": fn.get("name", ""),
                "arguments": _arguments(fn.get("arguments")),
            }
        )
    if not parts:
        parts.append({"type": "text", "content": ""})
    return {"role": role, "parts": parts}


def _arguments(raw: object) -> object:
    # GenAI parts hold the arguments as JSON, as the instrumentation writes them.
    if isinstance(raw, str):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            return raw
    return raw
