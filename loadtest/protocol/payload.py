"""Request bodies for the OpenAI-style APIs (chat, completions, responses), without I/O."""

from __future__ import annotations

import orjson

from loadtest.model.json import JsonObject
from loadtest.protocol.items import input_items, responses_tools

__all__ = ["build_payload", "messages_to_text"]


def messages_to_text(messages: list[JsonObject]) -> str:
    """Flatten chat messages into one prompt for the legacy completions API."""
    parts = [f"{m.get('role', 'user')}: {m.get('content') or ''}" for m in messages]
    return "\n".join(parts) + "\nassistant:"


def build_payload(
    *,
    api: str,
    model: str,
    messages: list[JsonObject],
    text: str | None,
    stream: bool,
    max_tokens: int,
    sampling: JsonObject,
    tools: list[JsonObject] | None,
) -> bytes:
    """Serialise one request body for ``/v1/chat/completions``, ``/v1/completions`` or
    ``/v1/responses`` (``api``: ``chat``, ``completions``, ``responses``)."""
    if api == "responses":
        return _responses_payload(model, messages, text, stream, max_tokens, sampling, tools)
    body: JsonObject = {"model": model, "max_tokens": max_tokens, "stream": stream}
    if api == "chat":
        body["messages"] = messages
        if tools:
            body["tools"] = tools
    else:
        body["prompt"] = text if text is not None else messages_to_text(messages)
    if stream:
        # Without this, most servers send no token counts on a stream.
        body["stream_options"] = {"include_usage": True}
    body.update(sampling)
    return orjson.dumps(body)


def _responses_payload(
    model: str,
    messages: list[JsonObject],
    text: str | None,
    stream: bool,
    max_tokens: int,
    sampling: JsonObject,
    tools: list[JsonObject] | None,
) -> bytes:
    # The Responses API always reports usage (in response.completed): no stream_options.
    body: JsonObject = {
        "model": model,
        "input": text if text is not None else input_items(messages),
        "max_output_tokens": max_tokens,
        "stream": stream,
    }
    if tools:
        body["tools"] = responses_tools(tools)
    body.update(sampling)
    return orjson.dumps(body)
