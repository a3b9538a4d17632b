"""The built-in simulated endpoint: an aiohttp server speaking the OpenAI API.

It serves ``/v1/chat/completions``, ``/v1/completions`` and ``/v1/responses`` (streaming
and not), ``/v1/models``, ``/health``, and ``/sim/truth``, which returns, per request, when the
server received it, when it scheduled and when it wrote the first token: the ground
truth the tests and benchmarks compare the client's measurements with.

With ``draft_url`` set, the server is the target of a speculative deployment: its
tokens come from ``StepEngine`` steps instead of a fixed schedule, and ``/metrics``
carries the speculative counters under vLLM's names. With ``lockstep``, plain streams
come from the engine's steps too, one token each a step.

The bytes on the wire are ``loadtest.sim.frames``; when they are written,
``loadtest.sim.streaming``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import os
import time
import weakref
from collections.abc import AsyncGenerator, AsyncIterator

import orjson
from aiohttp import web

from loadtest.model.json import JsonObject
from loadtest.sim.arrivals import Arrivals
from loadtest.sim.engine import StepEngine
from loadtest.sim.frames import error_response
from loadtest.sim.kv import KvLease, KvPool, KvStream
from loadtest.sim.load import BatchLoad, Pace
from loadtest.sim.metrics import server_samples
from loadtest.sim.model import ResponsePlan, SimConfig, Truth, plan_response
from loadtest.sim.prefix import PrefixCache
from loadtest.sim.profile import RangeWatch
from loadtest.sim.prometheus import Metric, metrics_handler
from loadtest.sim.responses import as_chat
from loadtest.sim.speculation import infer_category
from loadtest.sim.streaming import StreamShape, sleep_until, stream_response, timed, whole_response
from loadtest.sim.tokenize import MAX_MODEL_LEN, add_tokenize_routes
from loadtest.sim.vllm_stats import VllmStats

__all__ = ["SIM_KEY", "SimServer", "build_app"]

_perf = time.perf_counter_ns
_TRUTH_KEEP = 200_000
_ID_PREFIX = {"chat": "chatcmpl", "completions": "cmpl", "responses": "resp"}


class SimServer:
    """Request handling state of one simulator process."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.truth: collections.deque[Truth] = collections.deque(maxlen=_TRUTH_KEEP)
        self.running = 0
        self.waiting = 0
        self.served = 0
        self.cancelled = 0
        self.cold_starts = 0
        self.prefix = PrefixCache(config.prefix_cache, config.prefix_hit_factor)
        self.stats = VllmStats(MAX_MODEL_LEN)
        self._counter = 0
        # Processes sharing a port (procs) count on their own: the pid keeps their ids,
        # and so their /sim/truth entries, apart.
        self._id_tag = f"{os.getpid()}-" if config.procs > 1 or config.reuse_port else ""
        self._slots = asyncio.Semaphore(config.max_running) if config.max_running > 0 else None
        self._warm = config.cold_start_ms <= 0
        self._warming: asyncio.Task[None] | None = None
        self._last_active = time.monotonic()
        pace = None
        if config.pace_sigma > 0:
            pace = Pace(config.pace_sigma, int(config.pace_period_ms * 1e6), config.seed)
        self.load = BatchLoad(config.step_token_share, pace)
        self.kv = KvPool(config.kv_tokens, config.kv_preempt)
        self.fitted = RangeWatch.of(config)
        self.engine = StepEngine(config, self.load) if config.draft_url or config.lockstep else None
        self._leaks: set[asyncio.Task[None]] = set()
        self.arrivals: Arrivals = weakref.WeakKeyDictionary()
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
        return f"{prefix}-{self._id_tag}{self._counter}"

    async def models(self, request: web.Request) -> web.Response:
        """``GET /v1/models``."""
        data = [{"id": self.config.model, "object": "model", "owned_by": "loadtest-sim"}]
        return web.json_response({"object": "list", "data": data})

    async def health(self, request: web.Request) -> web.Response:
        """``GET /health``: status, running requests, and the pid (one of ``procs``)."""
        body: JsonObject = {"status": "ok", "running": self.running, "pid": os.getpid()}
        if self.engine is not None and self.engine.drafting:
            body["speculating"] = self.engine.speculating
        return web.json_response(body)

    async def truth_handler(self, request: web.Request) -> web.Response:
        """``GET /sim/truth``: the per-request ground truth kept so far (this process's:
        ``X-Sim-Pid`` says which, where ``procs`` share the port)."""
        body = orjson.dumps(list(self.truth))
        headers = {"X-Sim-Pid": str(os.getpid())}
        return web.Response(body=body, content_type="application/json", headers=headers)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/chat/completions``."""
        return await self._complete(request, "chat")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/completions``."""
        return await self._complete(request, "completions")

    async def responses(self, request: web.Request) -> web.StreamResponse:
        """``POST /v1/responses``: planned and timed as the chat request it amounts to."""
        return await self._complete(request, "responses")

    def samples(self) -> list[Metric]:
        """What ``/metrics`` shows, under vLLM's names where vLLM has one."""
        return server_samples(self)

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
            self.prefix.clear()

    async def _warm_up(self) -> None:
        """Pay the cold-start delay once; requests arriving meanwhile wait for it too."""
        if self._warm:
            return
        if self._warming is None or self._warming.done():
            self.cold_starts += 1
            self._warming = asyncio.create_task(asyncio.sleep(self.config.cold_start_ms / 1000))
        await asyncio.shield(self._warming)
        self._warm = True

    async def _complete(self, request: web.Request, api: str) -> web.StreamResponse:
        received = _perf()
        raw = await request.read()
        received = self._received(request, received)
        try:
            req = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return error_response(400, "request body is not JSON")
        if not isinstance(req, dict):
            return error_response(400, "request body must be a JSON object")
        if api == "responses":
            if not isinstance(req.get("input"), str | list):
                return error_response(400, "'input' must be a string or a list of items")
            req = as_chat(req)
        elif api == "chat" and not isinstance(req.get("messages"), list):
            return error_response(400, "'messages' must be a list")
        elif api == "completions" and not isinstance(req.get("prompt"), str):
            return error_response(400, "'prompt' must be a string")
        plan = plan_response(self.config, raw, req)
        rid = self._next_id(_ID_PREFIX[api])
        truth = Truth(
            id=rid,
            received_ns=received,
            completion_tokens=plan.completion_tokens,
            category=infer_category(req),
            reasoning_tokens=plan.reasoning_pieces,
            peer=request.remote or "",
        )
        self.truth.append(truth)
        if plan.fail_status is not None:
            truth.outcome = "error"
            return error_response(plan.fail_status, "simulated server error")
        self._cool_if_idle()
        self.waiting += 1
        stream = bool(req.get("stream"))
        # Preempting, a stream takes its answer's room token by token (KvStream).
        grows = self.kv.preempt and stream
        need = plan.prompt_tokens + (0 if grows else plan.completion_tokens)
        try:
            if self._slots is not None:
                await self._slots.acquire()
            try:
                lease = await self.kv.admit(need, preemptible=grows)
            except asyncio.CancelledError:
                if self._slots is not None:
                    self._slots.release()
                raise
        except asyncio.CancelledError:
            self._gone(truth)
            raise
        finally:
            self.waiting -= 1
        self.running += 1
        self.fitted.observe(self.running, plan.prompt_tokens)
        admitted = truth.admitted_ns = _perf()
        self.stats.request_admitted(truth)
        leaked = False
        try:
            await self._warm_up()
            plan, ttft = self.prefix.apply(plan, req)
            # The prefill shares its steps with what else runs: they slow it, as it will
            # slow them (counted while the stream waits for its first token); the
            # engine's pace (a machine's speed) slows it as it slows the decode steps.
            factor = self.load.factor(per_sequence=self._tokens_per_sequence(), own=0)
            if self.config.prefill_stall > 0:
                # A prompt prefilled whole (llama.cpp): the others' decode tokens ride in
                # its step at a token's cost each; they do not stretch every prompt token.
                ttft = int((ttft + self.config.itl_ms * 1e6 * (factor - 1)) * self.load.pace())
            else:
                ttft = int(ttft * factor * self.load.pace())
            if self.config.prefill_stall > 0:
                step_ns = int(self.config.itl_ms * 1e6)
                share = self.config.prefill_stall
                prefill = self.load.prefill(_perf(), ttft, step_ns, share)
                await prefill.done()
                # Its first token is due when the batch ends, not when this task woke
                # (later): a prefill queued behind it starts then, and must hold it.
                ttft = prefill.end_ns - received
            else:
                ttft += _perf() - received
            truth.first_token_scheduled_ns = received + ttft
            if stream:
                include_usage = bool((req.get("stream_options") or {}).get("include_usage"))
                kv = self._kv_stream(lease, plan) if grows else None
                source = self._source(plan, received, ttft, truth, kv)
                steps = None if self.engine is None else self.config.step_chunks
                shape = StreamShape(rid, self.config.model, api, include_usage, steps)
                shape.timings = self.config.flavour == "llama"
                shape.stats = self.stats
                shape.reasoning_format = self.config.reasoning_format
                async with contextlib.aclosing(source):  # closed before the lease goes
                    return await stream_response(request, plan, shape, truth, source)
            first_ns = received + ttft
            fmt = self.config.reasoning_format
            return await whole_response(plan, rid, self.config.model, api, first_ns, truth, fmt)
        except (ConnectionResetError, asyncio.CancelledError):
            self._gone(truth)
            if self.config.leak_cancelled or self.config.leak_on_disconnect_s > 0:
                leaked = True
                end = received + plan.token_offsets_ns[-1]
                if self.config.leak_on_disconnect_s > 0:
                    end = _perf() + int(self.config.leak_on_disconnect_s * 1e9)
                task = asyncio.get_running_loop().create_task(self._leak(end, lease))
                self._leaks.add(task)
                task.add_done_callback(self._leaks.discard)
            raise
        finally:
            if not leaked:
                self._release(lease)
            self.served += 1
            self._last_active = time.monotonic()
            truth.end_ns, truth.preemptions = _perf(), lease.evictions
            self.stats.request_ended(plan, truth, admitted, stream)

    def _gone(self, truth: Truth) -> None:
        truth.outcome = "client_gone"
        self.cancelled += 1

    def _release(self, lease: KvLease) -> None:
        self.running -= 1
        self.kv.release(lease)
        if self._slots is not None:
            self._slots.release()

    async def _leak(self, until_ns: int, lease: KvLease) -> None:
        await asyncio.sleep(max(0, until_ns - _perf()) / 1e9)
        self._release(lease)

    def _kv_stream(self, lease: KvLease, plan: ResponsePlan) -> KvStream:
        """A stream's side of the KV pool: room token by token, and its recompute."""
        tokens = (plan.prompt_tokens, plan.completion_tokens)
        chunk = self.config.prefill_chunk_tokens
        return KvStream(self.kv, lease, tokens, self._recompute_ns, self.load, chunk)

    def _recompute_ns(self, tokens: int) -> int:
        """A preempted request's recompute: a prefill of ``tokens`` and a step, in the batch."""
        ms = self.config.itl_ms + self.config.ttft_per_1k_tokens_ms * tokens / 1000
        factor = self.load.factor(per_sequence=self._tokens_per_sequence(), own=0)
        return int(ms * 1e6 * factor * self.load.pace())

    def _tokens_per_sequence(self) -> int:
        """Tokens a decoding sequence puts into each step: k + 1 while verifying."""
        return self.config.spec_k + 1 if self.engine and self.engine.speculating else 1

    async def _source(
        self, plan: ResponsePlan, received: int, ttft: int, truth: Truth, kv: KvStream | None
    ) -> AsyncGenerator[int, None]:
        """Yield the end index of the pieces to write next, when they are due.

        Until its first token the request's prefill chunk is in every step; after it,
        a plain stream is one decoding sequence (the engine counts its own).
        """
        chunk = min(plan.prompt_tokens, self.config.prefill_chunk_tokens)
        load = self.load
        load.prefilling += chunk
        prefilling, decoding = True, False
        try:
            if self.engine is None:
                shift = ttft - plan.ttft_ns  # queueing, warm-up and prefix cache move it all
                cap = self.config.max_batch
                async for j in timed(plan, received + shift, cap, load, kv, chunk):
                    if prefilling:
                        load.prefilling -= chunk
                        load.decoding += 1
                        prefilling, decoding = False, True
                    yield j
                return
            await sleep_until(received + ttft)
            if kv is not None:
                await kv.make_room(1, chunk, 0)  # preempted in its prefill: out of the batch
            load.prefilling -= chunk
            prefilling = False
            yield 1
        finally:
            if prefilling:
                load.prefilling -= chunk
            if decoding:
                load.decoding -= 1
        rid = truth.id.encode()
        seed = int.from_bytes(hashlib.blake2b(rid, digest_size=8).digest(), "little")
        accept = self._accept(truth.category)
        think = (plan.reasoning_pieces, self.config.accept_reasoning)
        steps = self.engine.decode(plan.completion_tokens, accept, seed, truth, kv, think)
        async with contextlib.aclosing(steps):  # its sequence out of the batch when closed
            async for j in steps:
                yield j

    def _accept(self, category: str) -> float:
        cfg = self.config
        return {
            "tool_calls": cfg.accept_tool_calls,
            "code": cfg.accept_code,
            "multilingual": cfg.accept_multilingual,
        }.get(category, cfg.accept_chat)


SIM_KEY: web.AppKey[SimServer] = web.AppKey("sim", SimServer)


def build_app(config: SimConfig) -> web.Application:
    """The aiohttp application of one simulator process."""
    sim = SimServer(config)
    app = web.Application()
    app[SIM_KEY] = sim
    app.router.add_post("/v1/chat/completions", sim.chat)
    app.router.add_post("/v1/completions", sim.completions)
    app.router.add_post("/v1/responses", sim.responses)
    app.router.add_get("/v1/models", sim.models)
    app.router.add_get("/health", sim.health)
    app.router.add_get("/sim/truth", sim.truth_handler)
    app.router.add_get("/metrics", metrics_handler(sim.samples))
    add_tokenize_routes(app, config.tokenizer)
    engine = sim.engine
    if engine is not None:

        async def engine_ctx(app: web.Application) -> AsyncIterator[None]:
            await engine.start()
            yield
            await engine.close()

        app.cleanup_ctx.append(engine_ctx)
    return app
