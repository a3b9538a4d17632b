"""The simulator's bytes: SSE chunk frames, final and usage chunks, error bodies.

Built once per response where they can be (``chunk_frame``), so a token costs one
``orjson.dumps`` of its text and two concatenations.
"""

from __future__ import annotations

import time

import orjson
from aiohttp import web

from loadtest.model.json import JsonObject
from loadtest.sim.model import ResponsePlan

__all__ = [
    "chunk_frame",
    "error_response",
    "final_chunk",
    "finish",
    "tool_first_chunk",
    "tool_head",
    "usage",
    "usage_chunk",
]


def finish(plan: ResponsePlan) -> str:
    return plan.finish_reason


def usage(plan: ResponsePlan) -> JsonObject:
    """OpenAI's usage object; with a prefix cache, how much of the prompt it served
    (``prompt_tokens_details.cached_tokens``, as vLLM reports it)."""
    out: JsonObject = {
        "prompt_tokens": plan.prompt_tokens,
        "completion_tokens": plan.completion_tokens,
        "total_tokens": plan.prompt_tokens + plan.completion_tokens,
    }
    if plan.cached_tokens is not None:
        out["prompt_tokens_details"] = {"cached_tokens": plan.cached_tokens}
    return out


def tool_head(plan: ResponsePlan, rid: str) -> JsonObject:
    return {"index": 0, "id": f"call_{plan.call_key}", "type": "function"}


def chunk_frame(rid: str, model: str, chat: bool, plan: ResponsePlan) -> tuple[bytes, bytes]:
    """The bytes around each piece's JSON string, built once per response."""
    created = int(time.time())
    if not chat:
        head = (
            f'data: {{"id":"{rid}","object":"text_completion","created":{created},'
            f'"model":"{model}","choices":[{{"index":0,"text":'
        )
        return head.encode(), b',"finish_reason":null}]}\n\n'
    head = (
        f'data: {{"id":"{rid}","object":"chat.completion.chunk","created":{created},'
        f'"model":"{model}","choices":[{{"index":0,"delta":'
    )
    if plan.tool_name is not None:
        return (head + '{"tool_calls":[{"index":0,"function":{"arguments":').encode(), (
            b'}}]},"finish_reason":null}]}\n\n'
        )
    return (head + '{"content":').encode(), b'},"finish_reason":null}]}\n\n'


def tool_first_chunk(rid: str, model: str, plan: ResponsePlan) -> bytes:
    call = tool_head(plan, rid) | {"function": {"name": plan.tool_name, "arguments": ""}}
    obj = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "delta": {"role": "assistant", "tool_calls": [call]},
                "finish_reason": None,
            }
        ],
    }
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def final_chunk(rid: str, model: str, chat: bool, plan: ResponsePlan) -> bytes:
    choice: JsonObject = {"index": 0, "finish_reason": finish(plan)}
    if chat:
        choice["delta"] = {}
    else:
        choice["text"] = ""
    obj: JsonObject = {
        "id": rid,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def usage_chunk(rid: str, model: str, chat: bool, plan: ResponsePlan) -> bytes:
    obj: JsonObject = {
        "id": rid,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": usage(plan),
    }
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def error_response(status: int, message: str) -> web.Response:
    body = {
        "error": {
            "message": message,
            "type": "server_error" if status >= 500 else "invalid_request_error",
            "code": status,
        }
    }
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")
