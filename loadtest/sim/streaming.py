"""Writing one simulated answer: a whole JSON body, or an SSE stream as tokens fall due.

A token source yields how many of the plan's pieces are ready, each time more are. The
plain model's source (``timed``) hands out pieces already due together, written in one
``write`` (up to ``max_batch`` chunks), so a fast configuration is limited by the socket,
not by one syscall per chunk. A speculative step's source yields once per verify step:
its accepted tokens go out either ``joined`` (one chunk carrying them all, as vLLM and
SGLang stream) or as a ``burst`` of one-token chunks written back to back (llama.cpp).
A think segment's pieces are framed as its ``reasoning_format`` says
(``sim.reasoning``); a step that ends it and begins the answer is written as two chunks,
one a part, in one write.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import orjson
from aiohttp import web

from loadtest.model.json import JsonObject
from loadtest.sim.frames import (
    chunk_frame,
    final_chunk,
    finish,
    llama_timings,
    reasoning_frame,
    reasoning_message,
    tool_first_chunk,
    tool_head,
    usage,
    usage_chunk,
)
from loadtest.sim.kv import KvStream
from loadtest.sim.load import BatchLoad
from loadtest.sim.model import ResponsePlan, Truth
from loadtest.sim.responses import (
    answer_opening,
    closing,
    delta_frame,
    opening,
    response_object,
    think_frame,
)
from loadtest.sim.vllm_stats import VllmStats

__all__ = ["StreamShape", "sleep_until", "stream_response", "timed", "whole_response"]

_perf = time.perf_counter_ns


async def sleep_until(due_ns: int) -> None:
    """Sleep until ``perf_counter_ns`` reaches ``due_ns`` (not at all if it has)."""
    delay = due_ns - _perf()
    if delay > 0:
        await asyncio.sleep(delay / 1e9)


async def timed(
    plan: ResponsePlan,
    start: int,
    cap: int,
    load: BatchLoad | None = None,
    kv: KvStream | None = None,
    chunk: int = 0,
) -> AsyncIterator[int]:
    """The plain model's schedule: pieces fall due at their planned offsets.

    The offsets are planned for a batch of one; with a ``load``, each gap is stretched
    by the step factor of the batch it falls in (read when the gap starts). Pieces
    already due are handed out together (up to ``cap``), so a fast configuration costs
    one write per batch rather than one per token. With a ``kv`` stream, each batch
    needs room for its tokens first: a stream preempted for it (or before it) leaves
    the batch (its decode token, or before its first token its prefill ``chunk``),
    waits to be admitted again and recomputes, and its tokens come after that.
    """
    offsets = plan.token_offsets_ns
    n = len(offsets)
    due = start + offsets[0]  # the first token: its TTFT is the caller's
    i = 0
    checked = due  # blocking prefills that start from the first token on hold the next
    while i < n:
        await sleep_until(due)
        if i > 0 and load is not None and load.stalls:
            # Other prompts' blocking prefills that began in this gap: the token waits them.
            held = load.stalled(checked, due)
            checked = due
            if held:
                due += held
                continue
        now = _perf()
        stretch = 1.0 if load is None else load.factor() * load.pace()
        j = i + 1
        while j < n and j - i < cap and due + (offsets[j] - offsets[j - 1]) * stretch <= now:
            due += int((offsets[j] - offsets[j - 1]) * stretch)
            j += 1
        if kv is not None and not kv.fits(j):
            await kv.make_room(j, 0 if i else chunk, 1 if i else 0)
            due = _perf()
        yield j
        if j < n:
            stretch = 1.0 if load is None else load.factor() * load.pace()
            due += int((offsets[j] - offsets[j - 1]) * stretch)
        i = j


async def whole_response(
    plan: ResponsePlan, rid: str, model: str, api: str, first_ns: int, truth: Truth, fmt: str
) -> web.Response:
    """The non-streamed answer, sent when its last token would have been (its think
    segment, if any, framed as ``fmt``, the ``reasoning_format``, says)."""
    end = first_ns + plan.token_offsets_ns[-1] - plan.ttft_ns
    await sleep_until(end)
    truth.first_token_written_ns = _perf()
    _parts_written(truth, plan, truth.first_token_written_ns, 0, plan.completion_tokens)
    truth.tokens_written = truth.steps = plan.completion_tokens
    split = plan.reasoning_pieces if fmt != "think-tags" or api == "responses" else 0
    if api == "responses":
        whole = orjson.dumps(response_object(plan, rid, model, True, split > 0))
        return web.Response(body=whole, content_type="application/json")
    if api == "chat":
        message: JsonObject = {"role": "assistant", "content": None}
        reasoning_message(plan, fmt, message)
        if plan.tool_name is not None:
            message["tool_calls"] = [
                tool_head(plan, rid)
                | {"function": {"name": plan.tool_name, "arguments": plan.tool_arguments}}
            ]
            if not split and plan.reasoning_pieces:  # think-tags: the content holds them
                message["content"] = "".join(plan.pieces[: plan.reasoning_pieces])
        else:
            message["content"] = "".join(plan.pieces[split:])
        choice: JsonObject = {"index": 0, "message": message, "finish_reason": finish(plan)}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": "".join(plan.pieces), "finish_reason": finish(plan)}
        obj = "text_completion"
    body = {
        "id": rid,
        "object": obj,
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage(plan),
    }
    return web.Response(body=orjson.dumps(body), content_type="application/json")


class StreamShape:
    """How one stream is framed: who it is, and how a step's tokens are chunked."""

    __slots__ = (
        "api",
        "include_usage",
        "model",
        "reasoning_format",
        "rid",
        "stats",
        "steps",
        "timings",
    )

    def __init__(
        self, rid: str, model: str, api: str, include_usage: bool, steps: str | None
    ) -> None:
        self.rid = rid
        self.model = model
        self.api = api
        """``chat``, ``completions`` or ``responses``: which API's bytes."""
        self.include_usage = include_usage
        self.steps = steps
        """None: the source yields due pieces (plain model); ``joined`` or ``burst``:
        it yields once per verify step, chunked that way."""
        self.timings = False
        """End with llama.cpp's ``timings`` (the ``llama`` flavour)."""
        self.stats: VllmStats | None = None
        """Told of each write, to observe its first token and gaps as vLLM does."""
        self.reasoning_format = "vllm"
        """How the plan's think segment is framed (``sim.reasoning``)."""


async def stream_response(
    request: web.Request,
    plan: ResponsePlan,
    shape: StreamShape,
    truth: Truth,
    source: AsyncIterator[int],
) -> web.StreamResponse:
    """Stream ``plan``'s pieces as ``source`` makes them ready, then the end."""
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await resp.prepare(request)
    rid, model, api = shape.rid, shape.model, shape.api
    chat = api == "chat"
    split = plan.reasoning_pieces
    # A server without a reasoning parser streams the think segment as answer text; the
    # Responses API has reasoning items of its own.
    parsed = split > 0 and (api == "responses" or shape.reasoning_format != "think-tags")
    # The API decides the frames once per response; the loop below is the same for all.
    if api == "responses":
        head, tail = delta_frame(rid, plan, parsed)
        first = opening(plan, rid, model, parsed)
        answer_first = answer_opening(plan, rid, parsed)
        think_head, think_tail = think_frame(rid)
        think = (lambda piece: think_head + piece + think_tail) if parsed else None
    else:
        head, tail = chunk_frame(rid, model, chat, plan)
        first = b""
        answer_first = tool_first_chunk(rid, model, plan) if plan.tool_name is not None else b""
        think = reasoning_frame(rid, model, chat, shape.reasoning_format) if split else None
    pieces = plan.pieces
    stop = len(pieces) if plan.disconnect_after is None else plan.disconnect_after
    joined = shape.steps == "joined"
    burst = shape.steps == "burst"
    i = 0
    async for ready in source:
        j = min(ready, stop)
        if j <= i:
            continue
        parts = []
        if i == 0 and first:
            parts.append(first)
        if i < split and think is not None:  # the think segment's pieces of this step
            if joined:
                parts.append(think(orjson.dumps("".join(pieces[i : min(j, split)]))))
            else:
                parts += [think(orjson.dumps(pieces[x])) for x in range(i, min(j, split))]
        if j > split:  # the answer's
            if i <= split and answer_first:
                parts.append(answer_first)
            a = max(i, split)
            if joined:
                parts.append(head + orjson.dumps("".join(pieces[a:j])) + tail)
            else:
                parts += [head + orjson.dumps(pieces[x]) + tail for x in range(a, j)]
        now = _perf()
        if i == 0:
            truth.first_token_written_ns = now
        _parts_written(truth, plan, now, i, j)
        if burst:
            for part in parts:  # one write per chunk, back to back, as llama.cpp sends
                await resp.write(part)
        else:
            await resp.write(b"".join(parts))
        # A verify step is one step however many tokens it gave; in the plain model
        # pieces due together are written together, but each was a step of its own.
        made = 1 if shape.steps is not None else j - i
        truth.steps += made
        truth.tokens_written = i = j
        if shape.stats is not None:
            shape.stats.streamed(truth, made, _perf())
        if i >= stop:
            break
    if plan.disconnect_after is not None:
        truth.outcome = "disconnected"
        if request.transport is not None:
            request.transport.close()
        return resp
    if api == "responses":
        # usage is always in response.completed
        await resp.write(closing(plan, rid, model, parsed))
        await resp.write_eof()
        return resp
    timings = llama_timings(plan, truth, _perf()) if shape.timings else None
    if shape.include_usage:
        end = final_chunk(rid, model, chat, plan) + usage_chunk(rid, model, chat, plan, timings)
    else:
        end = final_chunk(rid, model, chat, plan, timings)
    await resp.write(end + b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


def _parts_written(truth: Truth, plan: ResponsePlan, now_ns: int, i: int, j: int) -> None:
    """Note when the think segment began and ended, and the answer began, for a write of
    pieces ``i`` to ``j`` (``/sim/truth``): the first token's time, without reasoning."""
    split = plan.reasoning_pieces
    if i == 0 and split:
        truth.reasoning_start_ns = now_ns
    if i < split <= j:
        truth.reasoning_end_ns = now_ns
    if i <= split < j:
        truth.answer_start_ns = now_ns
