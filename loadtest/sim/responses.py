"""The simulator's Responses API (``POST /v1/responses``): request mapping and event bytes.

A Responses request is read as the chat request it amounts to (``as_chat``: input items
back to messages, ``max_output_tokens`` to ``max_tokens``, flat tools to chat tools), so
the plan, the timing model (plain or speculative, ``step_chunks``) and the truth are the
chat ones. Only the bytes differ: typed events (``event:`` line and ``type`` field),
framed once per response like the chat chunks (``delta_frame``), the opening events
written with the first token, the closing ones (``response.completed`` with usage) at
the end.

A think segment (``think``: the plan has one and a parser would split it out) is an
output item of its own before the answer, a ``reasoning`` item whose text comes in
``response.reasoning_text.delta`` events; the answer's item then opens when its first
piece is written (``answer_opening``), at output index 1.
"""

from __future__ import annotations

import time

import orjson

from loadtest.model.json import JsonObject
from loadtest.sim.model import ResponsePlan

__all__ = [
    "answer_opening",
    "as_chat",
    "closing",
    "delta_frame",
    "opening",
    "response_object",
    "think_frame",
]


def _message(item: JsonObject) -> JsonObject:
    content = item.get("content")
    if isinstance(content, list):
        content = "".join(
            str(p.get("text", "")) for p in content if isinstance(p, dict) and "text" in p
        )
    return {"role": str(item.get("role", "user")), "content": content}


def as_chat(req: JsonObject) -> JsonObject:
    """The chat request a Responses request amounts to (what the plan is drawn from)."""
    raw = req.get("input")
    messages: list[JsonObject] = []
    if isinstance(raw, str):
        messages.append({"role": "user", "content": raw})
    for item in raw if isinstance(raw, list) else ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "function_call_output":
            result = item.get("output")
            messages.append(
                {"role": "tool", "tool_call_id": item.get("call_id"), "content": result}
            )
        elif kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function", "function": item}
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        elif kind == "message":
            messages.append(_message(item))
    if isinstance(req.get("instructions"), str):
        messages.insert(0, {"role": "system", "content": req["instructions"]})
    out: JsonObject = {"messages": messages, "stream": bool(req.get("stream"))}
    if req.get("max_output_tokens"):
        out["max_tokens"] = req["max_output_tokens"]
    if isinstance(req.get("reasoning"), dict):
        out["reasoning"] = req["reasoning"]  # its effort moves the think segment
    tools = req.get("tools")
    if isinstance(tools, list) and tools:
        out["tools"] = [
            {"type": "function", "function": t}
            for t in tools
            if isinstance(t, dict) and t.get("type") == "function"
        ]
    return out


def _event(obj: JsonObject) -> bytes:
    return b"event: " + str(obj["type"]).encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


def _index(plan: ResponsePlan, think: bool) -> int:
    """The answer's output index: after the reasoning item, where there is one."""
    return 1 if think and plan.reasoning_pieces else 0


def _think_item(plan: ResponsePlan, rid: str, done: bool) -> JsonObject:
    text = "".join(plan.pieces[: plan.reasoning_pieces])
    return {
        "type": "reasoning",
        "id": f"rs_{rid}",
        "summary": [],
        "content": [{"type": "reasoning_text", "text": text}] if done else [],
        "status": "completed" if done else "in_progress",
    }


def _item(plan: ResponsePlan, rid: str, done: bool, think: bool = False) -> JsonObject:
    status = "completed" if done else "in_progress"
    if plan.tool_name is not None:
        return {
            "type": "function_call",
            "id": f"fc_{plan.call_key}",
            "call_id": f"call_{plan.call_key}",
            "name": plan.tool_name,
            "arguments": plan.tool_arguments if done else "",
            "status": status,
        }
    text = "".join(plan.pieces[plan.reasoning_pieces if think else 0 :])
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {
        "type": "message",
        "id": f"msg_{rid}",
        "role": "assistant",
        "status": status,
        "content": content if done else [],
    }


def response_object(
    plan: ResponsePlan, rid: str, model: str, done: bool, think: bool = False
) -> JsonObject:
    """The ``response`` object: empty while in progress, whole (with usage) when done."""
    output = [_item(plan, rid, True, think)]
    if _index(plan, think):
        output.insert(0, _think_item(plan, rid, True))
    obj: JsonObject = {
        "id": rid,
        "object": "response",
        "created_at": int(time.time()),
        "model": model,
        "status": "completed" if done else "in_progress",
        "error": None,
        "incomplete_details": None,
        "output": output if done else [],
        "usage": None,
    }
    if done:
        obj["usage"] = {
            "input_tokens": plan.prompt_tokens,
            "output_tokens": plan.completion_tokens,
            "total_tokens": plan.prompt_tokens + plan.completion_tokens,
        }
        if plan.reasoning_reported is not None:
            details = {"reasoning_tokens": plan.reasoning_reported}
            obj["usage"]["output_tokens_details"] = details
    return obj


def delta_frame(rid: str, plan: ResponsePlan, think: bool = False) -> tuple[bytes, bytes]:
    """The bytes around each answer piece's JSON string, built once per response."""
    if plan.tool_name is not None:
        kind, item = "response.function_call_arguments.delta", f"fc_{plan.call_key}"
        extra = ""
    else:
        kind, item = "response.output_text.delta", f"msg_{rid}"
        extra = ',"content_index":0'
    return _delta_head(kind, item, _index(plan, think), extra)


def think_frame(rid: str) -> tuple[bytes, bytes]:
    """The bytes around each think piece's JSON string (a reasoning text delta)."""
    return _delta_head("response.reasoning_text.delta", f"rs_{rid}", 0, ',"content_index":0')


def _delta_head(kind: str, item: str, index: int, extra: str) -> tuple[bytes, bytes]:
    head = (
        f'event: {kind}\ndata: {{"type":"{kind}","item_id":"{item}",'
        f'"output_index":{index}{extra},"delta":'
    )
    return head.encode(), b"}\n\n"


def opening(plan: ResponsePlan, rid: str, model: str, think: bool = False) -> bytes:
    """``response.created``, ``in_progress``, and the reasoning item where there is one
    (the answer's item opens with its first piece: ``answer_opening``)."""
    resp = response_object(plan, rid, model, False, think)
    out = _event({"type": "response.created", "response": resp})
    out += _event({"type": "response.in_progress", "response": resp})
    if _index(plan, think):
        item = _think_item(plan, rid, False)
        out += _event({"type": "response.output_item.added", "output_index": 0, "item": item})
    return out


def answer_opening(plan: ResponsePlan, rid: str, think: bool = False) -> bytes:
    """The reasoning item's end, if any, then the answer's item (and its text part)."""
    index = _index(plan, think)
    out = b""
    if index:
        done = _think_item(plan, rid, True)
        out += _event({"type": "response.output_item.done", "output_index": 0, "item": done})
    item = _item(plan, rid, False, think)
    out += _event({"type": "response.output_item.added", "output_index": index, "item": item})
    if plan.tool_name is None:
        part = {"type": "output_text", "text": "", "annotations": []}
        out += _event(
            {
                "type": "response.content_part.added",
                "item_id": item["id"],
                "output_index": index,
                "content_index": 0,
                "part": part,
            }
        )
    return out


def closing(plan: ResponsePlan, rid: str, model: str, think: bool = False) -> bytes:
    """The ``.done`` events of the answer's item and ``response.completed`` with usage."""
    index = _index(plan, think)
    item = _item(plan, rid, True, think)
    if plan.tool_name is not None:
        out = _event(
            {
                "type": "response.function_call_arguments.done",
                "item_id": item["id"],
                "output_index": index,
                "arguments": plan.tool_arguments,
            }
        )
    else:
        text = item["content"][0]["text"]
        out = _event(
            {
                "type": "response.output_text.done",
                "item_id": item["id"],
                "output_index": index,
                "content_index": 0,
                "text": text,
            }
        )
    out += _event({"type": "response.output_item.done", "output_index": index, "item": item})
    done = response_object(plan, rid, model, True, think)
    return out + _event({"type": "response.completed", "response": done})
