"""OpenAI wire format without I/O: request payloads, and a reader for streamed chunks.

``StreamReader`` is fed the SSE events of one response (or the body of a non-streaming
one) and keeps what the metrics need: the time of every token-bearing chunk, content
length, tool-call deltas assembled by index, ``usage`` and llama.cpp's ``timings``.
It is deliberately not a general OpenAI client: it only looks at the fields that
matter for latency and validity, so the per-chunk cost stays small.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson
from msgspec import UNSET, MsgspecError

from loadtest.errors import ProtocolError
from loadtest.model.json import JsonObject
from loadtest.protocol.chunks import CHUNK_DECODER, Chunk, decode_chunk
from loadtest.protocol.payload import build_payload, messages_to_text
from loadtest.protocol.reasoning import ThinkSplit
from loadtest.protocol.sse import Event

__all__ = [
    "STEP_GAP_NS",
    "ServerError",
    "StreamReader",
    "ToolCall",
    "build_payload",
    "messages_to_text",
]

_DONE = b"[DONE]"
STEP_GAP_NS = 1_000_000
"""Token chunks arriving closer together than this are one decode step: a burst of
one-token chunks from one verify step arrives well within it (llama.cpp;
docs/benchmarks.md), while steps are tens of ms apart."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call assembled from streamed deltas."""

    index: int
    name: str
    arguments: str
    id: str | None
    completed_ns: int
    """Time of the last chunk that added to this call."""


class ServerError(Exception):
    """The server reported an error inside an otherwise well-formed stream."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class StreamReader:
    """Interprets the chunks of one response; one instance per request."""

    END_MARK: ClassVar[str] = "[DONE]"
    """What ends a stream of this API; named when a stream is cut before it."""

    __slots__ = (
        "_calls",
        "_last_ns",
        "_text",
        "chunks",
        "client_lag_ns",
        "content_chars",
        "done",
        "finish_reason",
        "response_id",
        "split",
        "steps",
        "timings",
        "token_chunk_ns",
        "usage",
    )

    def __init__(self, keep_text: bool = False) -> None:
        self._text: list[str] | None = [] if keep_text else None
        self.chunks = 0
        """Data events received (token-bearing or not)."""
        self.token_chunk_ns: list[int] = []
        """Arrival time of every chunk that carried output (text, reasoning or tool call)."""
        self.steps = 0
        """Decode steps seen: runs of token chunks each within ``STEP_GAP_NS`` of the one
        before (one read, or a burst of one-token chunks from one verify step)."""
        self._last_ns = -STEP_GAP_NS - 1
        self.content_chars = 0
        self.usage: JsonObject | None = None
        self.timings: JsonObject | None = None
        self.finish_reason: str | None = None
        self.response_id: str | None = None
        self.done = False
        """True once ``[DONE]`` arrived (or a non-streaming body was read)."""
        self.client_lag_ns: int | None = None
        """Longest the client took to read bytes it had already received (set by the
        client, which knows both times; None until the body is read)."""
        self._calls: dict[int, list[Any]] = {}
        self.split = ThinkSplit()
        """Which token chunks were reasoning and which the answer (``protocol.reasoning``)."""

    # -- streaming ---------------------------------------------------------------------
    def on_event(self, event: Event, now_ns: int) -> None:
        """Consume one SSE event that arrived at ``now_ns``.

        Raises ``ServerError`` for an error the server reported and ``ProtocolError``
        for a chunk that is not the JSON the protocol promises.
        """
        data = event.data
        if event.event == "error":
            raise ServerError(_error_message(data))
        if data == _DONE:
            self.done = True
            return
        chunk = decode_chunk(data)
        if chunk is not None and self._take_typed(chunk, now_ns):
            self.chunks += 1
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ProtocolError(f"chunk is not JSON: {data[:120]!r}") from exc
        if not isinstance(obj, dict):
            raise ProtocolError(f"chunk is not a JSON object: {data[:120]!r}")
        self.chunks += 1
        self._take(obj, now_ns, streamed=True)

    def on_events(self, events: list[Event], now_ns: int) -> None:
        """``on_event`` for each event of one read, all arrived at ``now_ns``."""
        for event in events:
            self.on_event(event, now_ns)

    def on_json_lines(self, body: bytes, count: int, now_ns: int) -> None:
        """The ``count`` data events of one read, all arrived at ``now_ns``, as
        newline-delimited JSON (``SSEParser.feed_json``): the hot path. They are decoded
        in one call; a chunk of nothing but text is taken here, any other by the typed
        rules or, where only they can tell, the dictionary rules (``on_event``)."""
        try:
            chunks = CHUNK_DECODER.decode_lines(body)
        except MsgspecError:
            chunks = []
        if len(chunks) != count:  # a line no chunk: each gets the dictionary rules
            self.on_events([Event(d) for d in body.split(b"\n")], now_ns)
            return
        tokens = 0  # text chunks taken here, not yet stamped
        chars = 0
        keep = self._text
        split = self.split
        raw: list[bytes] | None = None
        for i, c in enumerate(chunks):
            if c.usage is None and c.timings is None and c.error is UNSET and c.choices:
                choice = c.choices[0]
                delta = choice.delta
                # Until the answer has begun, content may hold think tags: _take_typed.
                text = delta.content if delta is not None and not split.scanning else None
                if (
                    text
                    and delta is not None
                    and not (delta.tool_calls or delta.reasoning or delta.reasoning_content)
                    and not choice.finish_reason
                ):
                    if self.response_id is None:
                        self.response_id = c.id
                    chars += len(text)
                    if keep is not None:
                        keep.append(text)
                    tokens += 1
                    continue
            if tokens:
                self._stamp_text(tokens, chars, now_ns)
                tokens = chars = 0
            if self._take_typed(c, now_ns):
                self.chunks += 1
                continue
            raw = body.split(b"\n") if raw is None else raw
            self.on_event(Event(raw[i]), now_ns)
        if tokens:
            self._stamp_text(tokens, chars, now_ns)

    def _stamp_text(self, tokens: int, chars: int, now_ns: int) -> None:
        # ``tokens`` text chunks of one read: one step at most, as _take counts them.
        self.chunks += tokens
        self.content_chars += chars
        if now_ns - self._last_ns > STEP_GAP_NS:
            self.steps += 1
        self._last_ns = now_ns
        self.token_chunk_ns += [now_ns] * tokens

    # -- non-streaming -----------------------------------------------------------------
    def on_body(self, body: bytes, now_ns: int) -> None:
        """Consume the whole body of a non-streaming response that ended at ``now_ns``."""
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise ProtocolError(f"response body is not JSON: {body[:120]!r}") from exc
        if not isinstance(obj, dict):
            raise ProtocolError("response body is not a JSON object")
        self.chunks = 1
        self._take(obj, now_ns, streamed=False)
        self.steps = 0  # a whole body shows no verify steps (tokens_per_step skips it)
        self.done = True

    def _take_typed(self, c: Chunk, now_ns: int) -> bool:
        """``_take`` on the typed view of a streamed chunk (``protocol.chunks``); False,
        with nothing changed, where only the dictionary rules can tell what it means."""
        choices = c.choices
        if c.error is not UNSET and choices is UNSET:
            return False  # an error object: ``_take`` raises the server's message
        choice = choices[0] if choices else None
        delta = choice.delta if choice is not None else None
        text = think = None
        if delta is not None:
            text = delta.content
            think = delta.reasoning_content or delta.reasoning
            if not (text or think or delta.tool_calls) and choice is not None and choice.text:
                return False  # an empty-looking delta beside legacy text: see _take
        elif choice is not None:
            text = choice.text
        if self.response_id is None:
            self.response_id = c.id
        if c.usage:
            self.usage = c.usage
        if c.timings:
            self.timings = c.timings
        if choice is None:
            return True
        if choice.finish_reason:
            self.finish_reason = choice.finish_reason
        carried = self._carry(text, think, now_ns)
        if delta is not None and delta.tool_calls:
            self._take_calls(delta.tool_calls, now_ns)
            carried = True
        if carried:
            if now_ns - self._last_ns > STEP_GAP_NS:
                self.steps += 1
            self._last_ns = now_ns
            self.token_chunk_ns.append(now_ns)
        return True

    def _take(self, obj: JsonObject, now_ns: int, *, streamed: bool) -> None:
        if "error" in obj and "choices" not in obj:
            raise ServerError(_error_message(orjson.dumps(obj["error"])))
        if self.response_id is None:
            rid = obj.get("id")
            self.response_id = rid if isinstance(rid, str) else None
        usage = obj.get("usage")
        if usage:
            self.usage = _obj(usage, "usage")
        timings = obj.get("timings")
        if timings:
            self.timings = _obj(timings, "timings")
        choices = obj.get("choices")
        if not choices:
            return  # e.g. the usage-only chunk with empty choices
        # Type checks inline (``type(x) is``): this runs once per token chunk.
        if type(choices) is not list:
            raise ProtocolError("choices is not a list")
        choice = choices[0]
        if type(choice) is not dict:
            choice = _obj(choice, "choices[0]")
        fr = choice.get("finish_reason")
        if fr:
            self.finish_reason = str(fr)
        delta = choice.get("delta" if streamed else "message")
        if delta:
            if type(delta) is not dict:
                delta = _obj(delta, "delta" if streamed else "message")
            text = delta.get("content")
            think = delta.get("reasoning_content") or delta.get("reasoning")
            carried = self._carry(
                text if not text or type(text) is str else _str(text, "content"),
                think if not think or type(think) is str else _str(think, "reasoning"),
                now_ns,
            )
            calls = delta.get("tool_calls")
            if calls:
                if not isinstance(calls, list):
                    raise ProtocolError("tool_calls is not a list")
                self._take_calls(calls, now_ns)
                carried = True
        else:
            text = choice.get("text")  # legacy completions
            carried = self._carry(_str(text, "text") if text else None, None, now_ns)
        if carried:
            # One comparison per chunk: a chunk close behind the last one belongs to
            # the same step (llama.cpp streams a verify step as a burst of chunks).
            if now_ns - self._last_ns > STEP_GAP_NS:
                self.steps += 1
            self._last_ns = now_ns
            self.token_chunk_ns.append(now_ns)

    def _carry(self, text: str | None, think: str | None, now_ns: int) -> bool:
        """Take a chunk's answer ``text`` and reasoning ``think`` (before its stamp):
        True when it carried either."""
        split = self.split
        if think:
            self.content_chars += len(think)
            if self._text is not None:
                self._text.append(think)
            split.reasoning(think, now_ns)
        if text:
            self.content_chars += len(text)
            if self._text is not None:
                self._text.append(text)
            if split.scanning:
                split.content(text, now_ns, len(self.token_chunk_ns))
        return bool(text or think)

    def _take_calls(self, calls: list[Any], now_ns: int) -> None:
        if self.split.scanning:
            self.split.call(len(self.token_chunk_ns))
        for pos, raw in enumerate(calls):
            call = _obj(raw, "tool_calls entry")
            index = call.get("index", pos)
            if not isinstance(index, int):
                raise ProtocolError(f"tool_calls index is not an integer: {index!r:.60}")
            slot = self._calls.get(index)
            if slot is None:
                # [name, arguments, id, completed_ns]
                slot = self._calls[index] = ["", "", None, now_ns]
            fn = _obj(call.get("function") or {}, "tool_calls function")
            if fn.get("name"):
                slot[0] += _str(fn["name"], "function name")
            if fn.get("arguments"):
                args = fn["arguments"]
                # Some servers send arguments as an object in non-streamed replies.
                slot[1] += args if isinstance(args, str) else orjson.dumps(args).decode()
            if call.get("id"):
                slot[2] = str(call["id"])
            slot[3] = now_ns

    # -- results -----------------------------------------------------------------------
    @property
    def tool_calls(self) -> list[ToolCall]:
        """The assembled tool calls, ordered by index."""
        return [
            ToolCall(index=i, name=s[0], arguments=s[1], id=s[2], completed_ns=s[3])
            for i, s in sorted(self._calls.items())
        ]

    @property
    def text(self) -> str | None:
        """The output text (content and reasoning), if the reader was asked to keep it."""
        return None if self._text is None else "".join(self._text)

    def output_digest(self) -> str | None:
        """SHA-256 of the kept text and the tool calls: equal answers, equal digests."""
        if self._text is None:
            return None
        h = hashlib.sha256("".join(self._text).encode())
        for call in self.tool_calls:
            h.update(b"\0" + call.name.encode() + b"\0" + call.arguments.encode())
        return h.hexdigest()

    def output_tokens(self) -> tuple[int, bool]:
        """Output token count and whether it is an estimate (no ``usage`` was sent)."""
        if self.usage and isinstance(self.usage.get("completion_tokens"), int):
            return self.usage["completion_tokens"], False
        # Roughly four characters per token for English; tool-call JSON is counted too.
        chars = self.content_chars + sum(len(s[0]) + len(s[1]) for s in self._calls.values())
        return max(len(self.token_chunk_ns), round(chars / 4)), True


def _obj(value: Any, what: str) -> JsonObject:
    if not isinstance(value, dict):
        raise ProtocolError(f"{what} is not a JSON object: {value!r:.80}")
    return value


def _str(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise ProtocolError(f"{what} is not a string: {value!r:.80}")
    return value


def _error_message(data: bytes) -> str:
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError:
        return data[:200].decode("utf-8", "replace")
    if isinstance(obj, dict):
        inner = obj.get("error", obj)
        if isinstance(inner, dict):
            return str(inner.get("message") or inner)
        return str(inner)
    return str(obj)
