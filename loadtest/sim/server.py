"""The built-in simulated endpoint: an aiohttp server speaking the OpenAI API.

It serves ``/v1/chat/completions`` and ``/v1/completions`` (streaming and not),
``/v1/models``, ``/health``, and ``/sim/truth``, which returns, per request, when the
server received it, when it scheduled and when it wrote the first token: the ground
truth the tests and benchmarks compare the client's measurements with.

Tokens that fall due together are written in one ``write`` (up to ``max_batch``
chunks), so a fast configuration is limited by the socket, not by one syscall per chunk.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

import orjson
from aiohttp import web

from loadtest.sim.model import ResponsePlan, SimConfig, plan_response

__all__ = ["SIM_KEY", "SimServer", "build_app"]

_perf = time.perf_counter_ns
_TRUTH_KEEP = 200_000


class SimServer:
    """Request handling state of one simulator process."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.truth: collections.deque[dict[str, Any]] = collections.deque(maxlen=_TRUTH_KEEP)
        self.running = 0
        self.served = 0
        self._counter = 0

    def _next_id(self, prefix: str) -> str:
        self._counter += 1
        return f"{prefix}-{self._counter}"

    async def models(self, request: web.Request) -> web.Response:
        """``GET /v1/models``."""
        body = {
            "object": "list",
            "data": [{"id": self.config.model, "object": "model", "owned_by": "loadtest-sim"}],
        }
        return web.json_response(body)

    async def health(self, request: web.Request) -> web.Response:
        """``GET /health``."""
        return web.json_response({"status": "ok", "running": self.running})

    async def truth_handler(self, request: web.Request) -> web.Response:
        """``GET /sim/truth``: the per-request ground truth kept so far."""
        return web.Response(body=orjson.dumps(list(self.truth)), content_type="application/json")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/chat/completions``."""
        return await self._complete(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/completions``."""
        return await self._complete(request, chat=False)

    async def _complete(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        received = _perf()
        raw = await request.read()
        try:
            req = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return _error(400, "request body is not JSON")
        if not isinstance(req, dict):
            return _error(400, "request body must be a JSON object")
        if chat and not isinstance(req.get("messages"), list):
            return _error(400, "'messages' must be a list")
        if not chat and not isinstance(req.get("prompt"), str):
            return _error(400, "'prompt' must be a string")
        plan = plan_response(self.config, raw, req)
        rid = self._next_id("chatcmpl" if chat else "cmpl")
        truth: dict[str, Any] = {
            "id": rid,
            "received_ns": received,
            "first_token_scheduled_ns": received + plan.ttft_ns,
            "first_token_written_ns": None,
            "end_ns": None,
            "completion_tokens": plan.completion_tokens,
            "outcome": "ok",
        }
        self.truth.append(truth)
        if plan.fail_status is not None:
            truth["outcome"] = "error"
            return _error(plan.fail_status, "simulated server error")
        self.running += 1
        try:
            if req.get("stream"):
                include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
                return await self._stream(request, plan, rid, chat, include_usage, truth)
            return await self._whole(plan, rid, chat, received, truth)
        except (ConnectionResetError, asyncio.CancelledError):
            truth["outcome"] = "client_gone"
            raise
        finally:
            self.running -= 1
            self.served += 1
            truth["end_ns"] = _perf()

    async def _whole(
        self, plan: ResponsePlan, rid: str, chat: bool, received: int, truth: dict[str, Any]
    ) -> web.Response:
        end = received + plan.token_offsets_ns[-1]
        delay = end - _perf()
        if delay > 0:
            await asyncio.sleep(delay / 1e9)
        truth["first_token_written_ns"] = _perf()
        cfg = self.config
        usage = _usage(plan)
        if chat:
            message: dict[str, Any] = {"role": "assistant", "content": None}
            if plan.tool_name is not None:
                message["tool_calls"] = [
                    _tool_head(plan, rid)
                    | {"function": {"name": plan.tool_name, "arguments": plan.tool_arguments}}
                ]
            else:
                message["content"] = "".join(plan.pieces)
            choice: dict[str, Any] = {
                "index": 0,
                "message": message,
                "finish_reason": _finish(plan),
            }
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": "".join(plan.pieces), "finish_reason": _finish(plan)}
            obj = "text_completion"
        body = {
            "id": rid,
            "object": obj,
            "created": int(time.time()),
            "model": cfg.model,
            "choices": [choice],
            "usage": usage,
        }
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    async def _stream(
        self,
        request: web.Request,
        plan: ResponsePlan,
        rid: str,
        chat: bool,
        include_usage: bool,
        truth: dict[str, Any],
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        start = truth["received_ns"]
        head, tail = _chunk_frame(rid, self.config.model, chat, plan)
        offsets = plan.token_offsets_ns
        pieces = plan.pieces
        n = len(pieces)
        stop = n if plan.disconnect_after is None else plan.disconnect_after
        cap = self.config.max_batch
        i = 0
        while i < stop:
            due = start + offsets[i]
            now = _perf()
            if due > now:
                await asyncio.sleep((due - now) / 1e9)
                now = _perf()
            j = i
            parts = []
            while j < stop and j - i < cap and start + offsets[j] <= now:
                if j == 0 and plan.tool_name is not None:
                    parts.append(_tool_first_chunk(rid, self.config.model, plan))
                parts.append(head + orjson.dumps(pieces[j]) + tail)
                j += 1
            if j == i:  # woke a hair early: write the one that is due
                parts.append(head + orjson.dumps(pieces[j]) + tail)
                j += 1
            if i == 0:
                truth["first_token_written_ns"] = _perf()
            await resp.write(b"".join(parts))
            i = j
        if plan.disconnect_after is not None:
            truth["outcome"] = "disconnected"
            if request.transport is not None:
                request.transport.close()
            return resp
        end = _final_chunk(rid, self.config.model, chat, plan)
        if include_usage:
            end += _usage_chunk(rid, self.config.model, chat, plan)
        await resp.write(end + b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


def _finish(plan: ResponsePlan) -> str:
    if plan.tool_name is not None:
        return "tool_calls"
    return "length"


def _usage(plan: ResponsePlan) -> dict[str, int]:
    return {
        "prompt_tokens": plan.prompt_tokens,
        "completion_tokens": plan.completion_tokens,
        "total_tokens": plan.prompt_tokens + plan.completion_tokens,
    }


def _tool_head(plan: ResponsePlan, rid: str) -> dict[str, Any]:
    return {"index": 0, "id": f"call_{rid}", "type": "function"}


def _chunk_frame(rid: str, model: str, chat: bool, plan: ResponsePlan) -> tuple[bytes, bytes]:
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


def _tool_first_chunk(rid: str, model: str, plan: ResponsePlan) -> bytes:
    call = _tool_head(plan, rid) | {"function": {"name": plan.tool_name, "arguments": ""}}
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


def _final_chunk(rid: str, model: str, chat: bool, plan: ResponsePlan) -> bytes:
    choice: dict[str, Any] = {"index": 0, "finish_reason": _finish(plan)}
    if chat:
        choice["delta"] = {}
    else:
        choice["text"] = ""
    obj: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
    }
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _usage_chunk(rid: str, model: str, chat: bool, plan: ResponsePlan) -> bytes:
    obj: dict[str, Any] = {
        "id": rid,
        "object": "chat.completion.chunk" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [],
        "usage": _usage(plan),
    }
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _error(status: int, message: str) -> web.Response:
    body = {
        "error": {
            "message": message,
            "type": "server_error" if status >= 500 else "invalid_request_error",
            "code": status,
        }
    }
    return web.Response(status=status, body=orjson.dumps(body), content_type="application/json")


SIM_KEY: web.AppKey[SimServer] = web.AppKey("sim", SimServer)


def build_app(config: SimConfig) -> web.Application:
    """The aiohttp application of one simulator process."""
    sim = SimServer(config)
    app = web.Application()
    app[SIM_KEY] = sim
    app.router.add_post("/v1/chat/completions", sim.chat)
    app.router.add_post("/v1/completions", sim.completions)
    app.router.add_get("/v1/models", sim.models)
    app.router.add_get("/health", sim.health)
    app.router.add_get("/sim/truth", sim.truth_handler)
    return app
