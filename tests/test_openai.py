"""Payload building and the chunk reader's corner cases."""

from __future__ import annotations

import orjson
import pytest

from loadtest.errors import ProtocolError
from loadtest.protocol.openai import ServerError, StreamReader, build_payload, messages_to_text
from loadtest.protocol.sse import Event


def test_chat_payload_asks_for_usage_and_carries_tools_and_sampling() -> None:
    body = orjson.loads(
        build_payload(
            api="chat",
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            text=None,
            stream=True,
            max_tokens=5,
            sampling={"temperature": 0.2},
            tools=[{"type": "function", "function": {"name": "f"}}],
        )
    )
    assert body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0.2
    assert body["tools"][0]["function"]["name"] == "f"
    assert body["messages"][0]["content"] == "hi"


def test_completions_payload_uses_raw_text_or_flattened_messages() -> None:
    raw = orjson.loads(
        build_payload(
            api="completions",
            model="m",
            messages=[],
            text="def f():",
            stream=False,
            max_tokens=5,
            sampling={},
            tools=None,
        )
    )
    assert raw["prompt"] == "def f():"
    assert "stream_options" not in raw
    flat = messages_to_text([{"role": "user", "content": "hi"}])
    assert flat.startswith("user: hi") and flat.endswith("assistant:")


def test_no_usage_means_an_estimate_that_is_marked() -> None:
    r = StreamReader()
    for i in range(3):
        r.on_event(Event(orjson.dumps({"choices": [{"delta": {"content": "abcdefgh"}}]})), i)
    tokens, estimated = r.output_tokens()
    assert estimated is True
    assert tokens == 6  # 24 characters / 4


def test_non_streaming_body_with_tool_call_arguments_as_object() -> None:
    r = StreamReader()
    body = {
        "id": "x",
        "choices": [
            {
                "message": {
                    "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}]
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"completion_tokens": 7},
    }
    r.on_body(orjson.dumps(body), 42)
    assert r.done
    assert r.tool_calls[0].arguments == '{"a":1}'
    assert r.output_tokens() == (7, False)
    assert r.token_chunk_ns == [42]


def test_error_object_in_a_data_chunk_is_a_server_error() -> None:
    r = StreamReader()
    with pytest.raises(ServerError, match="overloaded"):
        r.on_event(Event(b'{"error": {"message": "overloaded"}}'), 0)


def test_non_object_chunk_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError):
        StreamReader().on_event(Event(b"[1, 2]"), 0)


def test_llama_cpp_timings_are_kept() -> None:
    r = StreamReader()
    r.on_event(
        Event(
            b'{"choices":[{"delta":{},"finish_reason":"stop"}],'
            b'"timings":{"prompt_ms":12.5,"predicted_ms":80.0}}'
        ),
        0,
    )
    assert r.timings == {"prompt_ms": 12.5, "predicted_ms": 80.0}
