"""A reader for the Responses API (``POST /v1/responses``): semantic events in, figures out.

The stream is SSE whose events are typed (``event: response.output_text.delta`` and a
``type`` field in the data). The reader yields the same per-request figures as the chat
reader, from the same fields it fills: a token chunk stamp for every text or tool-call
argument delta, ``usage`` (``input_tokens``/``output_tokens`` kept under the chat names
too, so accounting reads one shape), a finish reason, and the tool calls assembled from
``response.output_item.added`` (name, ``call_id``) and argument deltas. Event types it
does not know are ignored, as the API's own clients do; ``response.failed`` and
``error`` raise ``ServerError``; a stream that ends without ``response.completed``,
``response.incomplete`` or an explicit ``data: [DONE]`` is left not ``done``, which the
transport reports as cut (a ``[DONE]`` alone ends it, without usage).

The choice of reader is made once per request (``new_reader``): the chat reader's
per-chunk path is untouched.
"""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from loadtest.errors import ProtocolError
from loadtest.model.json import JsonObject
from loadtest.protocol.openai import (
    STEP_GAP_NS,
    ServerError,
    StreamReader,
    _error_message,
    _obj,
    _str,
)
from loadtest.protocol.sse import Event

__all__ = ["ResponsesReader", "new_reader"]

_DONE = b"[DONE]"
_TEXT_DELTAS = frozenset({"response.output_text.delta", "response.refusal.delta"})
_THINK_DELTAS = frozenset(
    {"response.reasoning_text.delta", "response.reasoning_summary_text.delta"}
)
_ENDS = frozenset({"response.completed", "response.incomplete"})


def new_reader(api: str, keep_text: bool = False) -> StreamReader:
    """The reader for one request to ``api`` (``chat``, ``completions``, ``responses``)."""
    return ResponsesReader(keep_text) if api == "responses" else StreamReader(keep_text)


class ResponsesReader(StreamReader):
    """Interprets the events of one Responses API answer; one instance per request."""

    END_MARK: ClassVar[str] = "response.completed"

    __slots__ = ("_items",)

    def __init__(self, keep_text: bool = False) -> None:
        super().__init__(keep_text)
        self._items: dict[str | int, int] = {}
        """Output item (by output_index, else item id) -> its tool-call slot."""

    # -- streaming ---------------------------------------------------------------------
    def on_json_lines(self, body: bytes, count: int, now_ns: int) -> None:
        """Data-only events (a Responses stream names its events): each as an event."""
        self.on_events([Event(d) for d in body.split(b"\n")], now_ns)

    def on_event(self, event: Event, now_ns: int) -> None:
        """Consume one SSE event that arrived at ``now_ns`` (see the module's notes)."""
        data = event.data
        if event.event == "error":
            raise ServerError(_error_message(data))
        if data == _DONE:
            self.done = True  # not part of the API, but an explicit end all the same
            return
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise ProtocolError(f"event is not JSON: {data[:120]!r}") from exc
        if not isinstance(obj, dict):
            raise ProtocolError(f"event is not a JSON object: {data[:120]!r}")
        self.chunks += 1
        kind = obj.get("type")
        if not isinstance(kind, str):
            kind = event.event
        if kind in _TEXT_DELTAS or kind in _THINK_DELTAS:
            delta = obj.get("delta")
            if delta:
                self._add_text(_str(delta, "delta"), now_ns, think=kind in _THINK_DELTAS)
        elif kind == "response.function_call_arguments.delta":
            delta = obj.get("delta")
            if delta:
                if self.split.scanning:
                    self.split.call(len(self.token_chunk_ns))
                slot = self._slot(obj, None, now_ns)
                slot[1] += _str(delta, "arguments delta")
                slot[3] = now_ns
                self._stamp(now_ns)
        elif kind == "response.function_call_arguments.done":
            slot = self._slot(obj, None, now_ns)
            if not slot[1] and isinstance(obj.get("arguments"), str):
                slot[1] = obj["arguments"]
        elif kind in ("response.output_item.added", "response.output_item.done"):
            item = _obj(obj.get("item") or {}, "item")
            if item.get("type") == "function_call":
                self._call_item(self._slot(obj, item, now_ns), item)
        elif kind in _ENDS:
            timings = obj.get("timings")  # llama.cpp adds its own beside the response
            if timings:
                self.timings = _obj(timings, "timings")
            self._end(_obj(obj.get("response") or {}, "response"))
        elif kind in ("response.created", "response.in_progress"):
            self._take_id(obj.get("response"))
        elif kind == "response.failed":
            resp = _obj(obj.get("response") or {}, "response")
            raise ServerError(_error_message(orjson.dumps(resp.get("error") or resp)))
        elif kind == "error":
            raise ServerError(_error_message(data))
        # Anything else (content_part.added, output_text.done, annotations, events of
        # later API versions) carries nothing the figures need.

    # -- non-streaming -----------------------------------------------------------------
    def on_body(self, body: bytes, now_ns: int) -> None:
        """Consume the whole body of a non-streaming response that ended at ``now_ns``."""
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError as exc:
            raise ProtocolError(f"response body is not JSON: {body[:120]!r}") from exc
        if not isinstance(obj, dict):
            raise ProtocolError("response body is not a JSON object")
        if obj.get("error") and not obj.get("output"):
            raise ServerError(_error_message(orjson.dumps(obj["error"])))
        self.chunks = 1
        output = obj.get("output") or []
        if not isinstance(output, list):
            raise ProtocolError("output is not a list")
        for pos, raw in enumerate(output):
            item = _obj(raw, "output item")
            kind = item.get("type")
            if kind == "function_call":
                self._call_item(self._slot({"output_index": pos}, item, now_ns), item)
            elif kind in ("message", "reasoning"):
                parts = item.get("content") or []
                if not isinstance(parts, list):
                    raise ProtocolError("message content is not a list")
                for part in parts:
                    text = _obj(part, "content part").get("text")
                    if text:
                        think = kind == "reasoning"
                        self._add_text(_str(text, "text"), now_ns, stamp=False, think=think)
        if self.content_chars or self._calls:
            self._stamp(now_ns)
        self.steps = 0  # a whole body shows no verify steps (tokens_per_step skips it)
        self._end(obj)

    # -- pieces ------------------------------------------------------------------------
    def _stamp(self, now_ns: int) -> None:
        # The chat reader's rule: a chunk close behind the last one is the same step.
        if now_ns - self._last_ns > STEP_GAP_NS:
            self.steps += 1
        self._last_ns = now_ns
        self.token_chunk_ns.append(now_ns)

    def _add_text(self, text: str, now_ns: int, *, stamp: bool = True, think: bool = False) -> None:
        # A whole body's one stamp comes after its text: it is chunk 0 all the same.
        self._carry(None if think else text, text if think else None, now_ns)
        if stamp:
            self._stamp(now_ns)

    def _slot(self, obj: JsonObject, item: JsonObject | None, now_ns: int) -> list[Any]:
        """The tool-call slot of the output item an event is about (made on first sight)."""
        key = obj.get("output_index")
        if not isinstance(key, int):
            key = obj.get("item_id") or (item or {}).get("id") or 0
            if not isinstance(key, str | int):
                raise ProtocolError(f"item id is not a string: {key!r:.60}")
        index = self._items.get(key)
        if index is None:
            index = self._items[key] = len(self._calls)
            # [name, arguments, id, completed_ns], as the chat reader keeps them
            self._calls[index] = ["", "", None, now_ns]
        return self._calls[index]

    @staticmethod
    def _call_item(slot: list[Any], item: JsonObject) -> None:
        if not slot[0] and item.get("name"):
            slot[0] = _str(item["name"], "function name")
        call_id = item.get("call_id") or item.get("id")
        if call_id and slot[2] is None:
            slot[2] = str(call_id)
        args = item.get("arguments")
        if not slot[1] and args:
            slot[1] = args if isinstance(args, str) else orjson.dumps(args).decode()

    def _take_id(self, response: object) -> None:
        if self.response_id is None and isinstance(response, dict):
            rid = response.get("id")
            self.response_id = rid if isinstance(rid, str) else None

    def _end(self, response: JsonObject) -> None:
        self._take_id(response)
        usage = response.get("usage")
        if usage:
            raw = _obj(usage, "usage")
            # Under the chat names as well: accounting and output_tokens read those.
            self.usage = {
                **raw,
                "prompt_tokens": raw.get("input_tokens"),
                "completion_tokens": raw.get("output_tokens"),
            }
        status = response.get("status")
        details = response.get("incomplete_details")
        if status == "incomplete" and isinstance(details, dict):
            reason = details.get("reason")
            self.finish_reason = "length" if reason == "max_output_tokens" else str(reason)
        elif status in (None, "completed"):
            self.finish_reason = "tool_calls" if self._calls else "stop"
        else:
            self.finish_reason = str(status)
        self.done = True
