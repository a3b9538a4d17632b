"""The built-in simulated endpoint: an aiohttp server speaking the OpenAI API.

It serves ``/v1/chat/completions`` and ``/v1/completions`` (streaming and not),
``/v1/models``, ``/health``, and ``/sim/truth``, which returns, per request, when the
server received it, when it scheduled and when it wrote the first token: the ground
truth the tests and benchmarks compare the client's measurements with.

With ``draft_url`` set, the server is the target of a speculative deployment: its
tokens come from ``SpecEngine`` steps instead of a fixed schedule, and ``/metrics``
carries the speculative counters under vLLM's names.

Tokens that fall due together are written in one ``write`` (up to ``max_batch``
chunks), so a fast configuration is limited by the socket, not by one syscall per chunk.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import os
import time
import weakref
from collections.abc import AsyncIterator
from typing import Any

import orjson
from aiohttp import web

from loadtest._compat import kernel_stamps
from loadtest.sim.engine import SpecEngine
from loadtest.sim.model import ResponsePlan, SimConfig, plan_response
from loadtest.sim.prometheus import Sample, metrics_handler
from loadtest.sim.speculation import infer_category
from loadtest.sim.tokenize import add_tokenize_routes

__all__ = ["SIM_KEY", "SimServer", "build_app", "stamp_arrivals"]

_perf = time.perf_counter_ns
_TRUTH_KEEP = 200_000
_PREFIX_KEEP = 10_000


class SimServer:
    """Request handling state of one simulator process."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.truth: collections.deque[dict[str, Any]] = collections.deque(maxlen=_TRUTH_KEEP)
        self.running = 0
        self.waiting = 0
        self.served = 0
        self.cancelled = 0
        self.cold_starts = 0
        self.prefix_hits = 0
        self.prefix_misses = 0
        self._counter = 0
        self._slots = asyncio.Semaphore(config.max_running) if config.max_running > 0 else None
        self._warm = config.cold_start_ms <= 0
        self._warming: asyncio.Task[None] | None = None
        self._last_active = time.monotonic()
        self._prefixes: collections.OrderedDict[bytes, None] = collections.OrderedDict()
        self.engine = SpecEngine(config) if config.draft_url else None
        self._leaks: set[asyncio.Task[None]] = set()
        self.arrivals: weakref.WeakKeyDictionary[Any, _Arrival] = weakref.WeakKeyDictionary()
        """Per connection (by transport), when its latest bytes reached the kernel."""

    def _received(self, request: web.Request, handler_ns: int) -> int:
        # The truth starts when the request arrived, as a client sees it: a request
        # that waited in this process's loop has waited on the server. The latest read
        # on the connection is the one that completed this request (a client sends the
        # next one only after this answer).
        arrival = self.arrivals.get(request.transport)
        return handler_ns if arrival is None or arrival.rx_ns == 0 else arrival.rx_ns

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
        """``GET /health``: status, running requests, and the pid (one of ``procs``)."""
        body: dict[str, Any] = {"status": "ok", "running": self.running, "pid": os.getpid()}
        if self.engine is not None:
            body["speculating"] = self.engine.speculating
        return web.json_response(body)

    async def truth_handler(self, request: web.Request) -> web.Response:
        """``GET /sim/truth``: the per-request ground truth kept so far."""
        return web.Response(body=orjson.dumps(list(self.truth)), content_type="application/json")

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/chat/completions``."""
        return await self._complete(request, chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/completions``."""
        return await self._complete(request, chat=False)

    def samples(self) -> list[Sample]:
        """What ``/metrics`` shows, under vLLM's names where vLLM has one."""
        out: list[Sample] = [
            ("vllm:num_requests_running", "gauge", self.running, "Requests being served."),
            ("vllm:num_requests_waiting", "gauge", self.waiting, "Requests queued."),
            ("loadtest_sim_requests_served", "counter", self.served, "Requests ended."),
            (
                "loadtest_sim_cancellations",
                "counter",
                self.cancelled,
                "Requests whose client went away before the end.",
            ),
            ("loadtest_sim_cold_starts", "counter", self.cold_starts, "Warm-ups paid."),
            ("loadtest_sim_prefix_cache_hits", "counter", self.prefix_hits, "Prefix hits."),
        ]
        if self._slots is not None:
            usage = self.running / self.config.max_running
            out.append(("vllm:kv_cache_usage_perc", "gauge", usage, "Share of slots in use."))
        eng = self.engine
        if eng is not None:
            out += [
                (
                    "vllm:spec_decode_num_draft_tokens",
                    "counter",
                    eng.draft_tokens,
                    "Draft tokens proposed to the verifier.",
                ),
                (
                    "vllm:spec_decode_num_accepted_tokens",
                    "counter",
                    eng.accepted_tokens,
                    "Draft tokens the verifier accepted.",
                ),
                ("vllm:spec_decode_num_drafts", "counter", eng.drafts, "Draft steps."),
                (
                    "loadtest_sim_draft_fallbacks",
                    "counter",
                    eng.health.fallbacks,
                    "Switches from speculation to plain decoding.",
                ),
                ("loadtest_sim_plain_steps", "counter", eng.plain_steps, "Steps without draft."),
                ("loadtest_sim_speculating", "gauge", int(eng.speculating), "1 = drafts in use."),
            ]
        return out

    def _cool_if_idle(self) -> None:
        """An arrival after ``idle_cold_s`` with nothing running finds the server cold."""
        idle = self.config.idle_cold_s
        if (
            self._warm
            and idle > 0
            and self.running == 0
            and self.waiting == 0
            and time.monotonic() - self._last_active > idle
        ):
            self._warm = False
            self._prefixes.clear()

    async def _warm_up(self) -> None:
        """Pay the cold-start delay once; requests arriving meanwhile wait for it too."""
        if self._warm:
            return
        if self._warming is None or self._warming.done():
            self.cold_starts += 1
            self._warming = asyncio.create_task(asyncio.sleep(self.config.cold_start_ms / 1000))
        await asyncio.shield(self._warming)
        self._warm = True

    def _prefill_ns(self, plan: ResponsePlan, req: dict[str, Any]) -> int:
        """TTFT after the prefix cache: a repeated prefix pays only part of its prefill."""
        if not self.config.prefix_cache:
            return plan.ttft_ns
        key = hashlib.blake2b(_prefix_text(req), digest_size=12).digest()
        if key in self._prefixes:
            self._prefixes.move_to_end(key)
            self.prefix_hits += 1
            saved = plan.prefill_ns * (1.0 - self.config.prefix_hit_factor)
            return plan.ttft_ns - int(saved)
        self.prefix_misses += 1
        self._prefixes[key] = None
        if len(self._prefixes) > _PREFIX_KEEP:
            self._prefixes.popitem(last=False)
        return plan.ttft_ns

    async def _complete(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        received = _perf()
        raw = await request.read()
        received = self._received(request, received)
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
            "first_token_scheduled_ns": None,
            "first_token_written_ns": None,
            "end_ns": None,
            "completion_tokens": plan.completion_tokens,
            "category": infer_category(req),
            "outcome": "ok",
        }
        self.truth.append(truth)
        if plan.fail_status is not None:
            truth["outcome"] = "error"
            return _error(plan.fail_status, "simulated server error")
        self._cool_if_idle()
        self.waiting += 1
        try:
            if self._slots is not None:
                await self._slots.acquire()
        except asyncio.CancelledError:
            self._gone(truth)
            raise
        finally:
            self.waiting -= 1
        self.running += 1
        leaked = False
        try:
            await self._warm_up()
            ttft = self._prefill_ns(plan, req) + (_perf() - received)
            truth["first_token_scheduled_ns"] = received + ttft
            if req.get("stream"):
                include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
                source = self._source(plan, received, ttft, truth["category"], rid)
                return await self._stream(request, plan, rid, chat, include_usage, truth, source)
            return await self._whole(plan, rid, chat, received + ttft, truth)
        except (ConnectionResetError, asyncio.CancelledError):
            self._gone(truth)
            if self.config.leak_cancelled:
                leaked = True
                end = received + plan.token_offsets_ns[-1]
                task = asyncio.get_running_loop().create_task(self._leak(end))
                self._leaks.add(task)
                task.add_done_callback(self._leaks.discard)
            raise
        finally:
            if not leaked:
                self._release()
            self.served += 1
            self._last_active = time.monotonic()
            truth["end_ns"] = _perf()

    def _gone(self, truth: dict[str, Any]) -> None:
        truth["outcome"] = "client_gone"
        self.cancelled += 1

    def _release(self) -> None:
        self.running -= 1
        if self._slots is not None:
            self._slots.release()

    async def _leak(self, until_ns: int) -> None:
        await asyncio.sleep(max(0, until_ns - _perf()) / 1e9)
        self._release()

    async def _source(
        self, plan: ResponsePlan, received: int, ttft: int, category: str, rid: str
    ) -> AsyncIterator[int]:
        """Yield the end index of the pieces to write next, when they are due."""
        if self.engine is None:
            shift = ttft - plan.ttft_ns  # queueing, warm-up and prefix cache move it all
            async for j in _timed(plan, received + shift, self.config.max_batch):
                yield j
            return
        await _sleep_until(received + ttft)
        yield 1
        seed = int.from_bytes(hashlib.blake2b(rid.encode(), digest_size=8).digest(), "little")
        async for j in self.engine.decode(plan.completion_tokens, self._accept(category), seed):
            yield j

    def _accept(self, category: str) -> float:
        cfg = self.config
        return {
            "tool_calls": cfg.accept_tool_calls,
            "code": cfg.accept_code,
            "multilingual": cfg.accept_multilingual,
        }.get(category, cfg.accept_chat)

    async def _whole(
        self, plan: ResponsePlan, rid: str, chat: bool, first_ns: int, truth: dict[str, Any]
    ) -> web.Response:
        end = first_ns + plan.token_offsets_ns[-1] - plan.ttft_ns
        await _sleep_until(end)
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
        source: AsyncIterator[int],
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        head, tail = _chunk_frame(rid, self.config.model, chat, plan)
        pieces = plan.pieces
        stop = len(pieces) if plan.disconnect_after is None else plan.disconnect_after
        i = 0
        async for ready in source:
            j = min(ready, stop)
            if j <= i:
                continue
            parts = []
            if i == 0 and plan.tool_name is not None:
                parts.append(_tool_first_chunk(rid, self.config.model, plan))
            parts += [head + orjson.dumps(pieces[x]) + tail for x in range(i, j)]
            if i == 0:
                truth["first_token_written_ns"] = _perf()
            await resp.write(b"".join(parts))
            i = j
            if i >= stop:
                break
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


async def _sleep_until(due_ns: int) -> None:
    delay = due_ns - _perf()
    if delay > 0:
        await asyncio.sleep(delay / 1e9)


async def _timed(plan: ResponsePlan, start: int, cap: int) -> AsyncIterator[int]:
    """The plain model's schedule: pieces fall due at their planned offsets.

    Pieces already due are handed out together (up to ``cap``), so a fast configuration
    costs one write per batch rather than one per token.
    """
    offsets = plan.token_offsets_ns
    n = len(offsets)
    i = 0
    while i < n:
        await _sleep_until(start + offsets[i])
        now = _perf()
        j = i + 1
        while j < n and j - i < cap and start + offsets[j] <= now:
            j += 1
        yield j
        i = j


def _prefix_text(req: dict[str, Any]) -> bytes:
    """The first 1 KB of the prompt: what a prefix cache would find again."""
    prompt = req.get("prompt")
    if isinstance(prompt, str):
        return prompt[:1024].encode()
    return orjson.dumps(req.get("messages"))[:1024]


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


class _Arrival:
    __slots__ = ("rx_ns",)

    def __init__(self) -> None:
        self.rx_ns = 0


def stamp_arrivals(server: web.Server, sim: SimServer) -> None:
    """Have the kernel stamp each new connection's reads (``loadtest._compat.kernel_stamps``).

    The truth of a request then starts when its last byte reached this machine, not
    when this process got round to it. aiohttp calls ``Server.connection_made`` for
    every connection before its first read; where stamps are not possible (uvloop, not
    Linux), ``received_ns`` stays the handler's start.
    """
    made = server.connection_made

    def connection_made(handler: Any, transport: Any) -> None:
        arrival = _Arrival()
        if kernel_stamps.install(transport, arrival):
            sim.arrivals[transport] = arrival
        made(handler, transport)

    server.connection_made = connection_made  # type: ignore[method-assign]


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
    app.router.add_get("/metrics", metrics_handler(sim.samples))
    add_tokenize_routes(app)
    engine = sim.engine
    if engine is not None:

        async def engine_ctx(app: web.Application) -> AsyncIterator[None]:
            await engine.start()
            yield
            await engine.close()

        app.cleanup_ctx.append(engine_ctx)
    return app
