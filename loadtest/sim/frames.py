"""The simulator's bytes: SSE chunk frames, final and usage chunks, error bodies.

Built once per response where they can be (``chunk_frame``), so a token costs one
``orjson.dumps`` of its text and two concatenations.
"""

from __future__ import annotations

import time
from collections.abc import Callable

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
    "reasoning_frame",
    "reasoning_message",
    "text_frame",
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
    if plan.reasoning_reported is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": plan.reasoning_reported}
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


def _delta_head(rid: str, model: str) -> str:
    return (
        f'data: {{"id":"{rid}","object":"chat.completion.chunk","created":{int(time.time())},'
        f'"model":"{model}","choices":[{{"index":0,"delta":'
    )


def text_frame(rid: str, model: str, chat: bool) -> tuple[bytes, bytes]:
    """The bytes around a text piece's JSON string (``content``, or a completion's
    ``text``), built once per response."""
    if not chat:
        head = (
            f'data: {{"id":"{rid}","object":"text_completion","created":{int(time.time())},'
            f'"model":"{model}","choices":[{{"index":0,"text":'
        )
        return head.encode(), b',"finish_reason":null}]}\n\n'
    return (_delta_head(rid, model) + '{"content":').encode(), b'},"finish_reason":null}]}\n\n'


def chunk_frame(rid: str, model: str, chat: bool, plan: ResponsePlan) -> tuple[bytes, bytes]:
    """The bytes around each answer piece's JSON string, built once per response."""
    if chat and plan.tool_name is not None:
        head = _delta_head(rid, model) + '{"tool_calls":[{"index":0,"function":{"arguments":'
        return head.encode(), b'}}]},"finish_reason":null}]}\n\n'
    return text_frame(rid, model, chat)


_REASONING_FIELDS = {
    "vllm": ("reasoning", "reasoning_content"),
    "reasoning": ("reasoning",),
    "llama": ("reasoning_content",),
}


def reasoning_frame(rid: str, model: str, chat: bool, fmt: str) -> Callable[[bytes], bytes]:
    """Frames a think piece's JSON string as ``fmt`` streams it (``sim.reasoning``): in
    the reasoning field(s) of a chat delta, or as plain text where no parser splits it
    out (``think-tags``, and the completions API, which has no reasoning field)."""
    fields = _REASONING_FIELDS.get(fmt) if chat else None
    if fields is None:
        head, tail = text_frame(rid, model, chat)
        return lambda piece: head + piece + tail
    start = (_delta_head(rid, model) + "{").encode()
    end = b'},"finish_reason":null}]}\n\n'
    keys = [f'"{name}":'.encode() for name in fields]
    if len(keys) == 1:
        return lambda piece: start + keys[0] + piece + end
    return lambda piece: start + keys[0] + piece + b"," + keys[1] + piece + end


def reasoning_message(plan: ResponsePlan, fmt: str, message: JsonObject) -> None:
    """Put a whole answer's think segment into ``message`` as ``fmt`` would (the content
    keeps it, tags and all, with ``think-tags``)."""
    split = plan.reasoning_pieces
    if not split or fmt == "think-tags":
        return
    think = "".join(plan.pieces[:split])
    for name in _REASONING_FIELDS[fmt]:
        message[name] = think


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
