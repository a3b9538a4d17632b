"""The simulator's bytes: SSE chunk frames, final and usage chunks, error bodies.

Built once per response where they can be (``chunk_frame``), so a token costs one
``orjson.dumps`` of its text and two concatenations.
"""

from __future__ import annotations

import time

import orjson
from aiohttp import web

from loadtest.model.json import JsonObject
from loadtest.sim.model import ResponsePlan, Truth

__all__ = [
    "chunk_frame",
    "error_response",
    "final_chunk",
    "finish",
    "llama_timings",
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


def llama_timings(plan: ResponsePlan, truth: Truth, end_ns: int) -> JsonObject:
    """llama.cpp's ``timings`` of a finished stream, from what the server saw: the
    prefill from the slot to the first token (queueing not in it, as in llama.cpp), the
    decode from there to the end; the draft counts only while speculating."""
    first = truth.first_token_written_ns or end_ns
    prompt_ms = max(0, first - (truth.admitted_ns or truth.received_ns)) / 1e6
    predicted_ms = max(0, end_ns - first) / 1e6
    cached = plan.cached_tokens or 0
    prompt_n = max(0, plan.prompt_tokens - cached)
    predicted_n = truth.tokens_written
    out: JsonObject = {
        "cache_n": cached,
        "prompt_n": prompt_n,
        "prompt_ms": round(prompt_ms, 3),
        "prompt_per_token_ms": round(prompt_ms / prompt_n, 6) if prompt_n else 0.0,
        "prompt_per_second": round(1000 * prompt_n / prompt_ms, 3) if prompt_ms else 0.0,
        "predicted_n": predicted_n,
        "predicted_ms": round(predicted_ms, 3),
        "predicted_per_token_ms": round(predicted_ms / predicted_n, 6) if predicted_n else 0.0,
        "predicted_per_second": (
            round(1000 * predicted_n / predicted_ms, 3) if predicted_ms else 0.0
        ),
    }
    if truth.drafted:
        out |= {"draft_n": truth.drafted, "draft_n_accepted": truth.draft_accepted}
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


def final_chunk(
    rid: str, model: str, chat: bool, plan: ResponsePlan, timings: JsonObject | None = None
) -> bytes:
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
    if timings is not None:
        obj["timings"] = timings
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def usage_chunk(
    rid: str, model: str, chat: bool, plan: ResponsePlan, timings: JsonObject | None = None
) -> bytes:
    obj: JsonObject = {
        "id": rid,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": usage(plan),
    }
    if timings is not None:
        obj["timings"] = timings  # llama.cpp puts them on its last chunk, the usage one
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
