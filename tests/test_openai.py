"""Payload building and the chunk reader's corner cases."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# -- the typed fast path against the dictionary rules ------------------------------------
_text = st.sampled_from([" tok", " tok", "ü", "", None])
_odd_text = st.sampled_from(["", None, 5])
_delta = st.fixed_dictionaries(
    {},
    optional={
        "content": _text,
        "reasoning_content": _text,
        "reasoning": _text,
        "role": st.just("assistant"),
        "tool_calls": st.sampled_from(
            [None, [], [{"index": 0, "id": "c1", "function": {"name": "f", "arguments": "{"}}]]
        ),
    },
)
_choice = st.fixed_dictionaries(
    {"delta": st.one_of(_delta, _delta, st.none())},
    optional={"text": _text, "finish_reason": st.sampled_from([None, "stop", "length"])},
)
_chunk = st.fixed_dictionaries(
    {"id": st.sampled_from(["r1", "r2"]), "choices": st.lists(_choice, min_size=1, max_size=2)},
    optional={
        # Distinct values, so that a chunk's usage taken or lost shows in the end state.
        "usage": st.one_of(
            st.none(), st.builds(lambda n: {"completion_tokens": n}, st.integers(0, 10**6))
        ),
        "timings": st.one_of(
            st.none(), st.builds(lambda n: {"prompt_ms": n}, st.integers(0, 10**6))
        ),
    },
)
_odd = st.sampled_from(
    [
        b"[DONE]",
        b"",
        b" ",
        b"[1]",
        b"{bad",
        b'{"error": {"message": "boom"}}',
        b'{"choices": "x"}',
        b'{"id": 7, "choices": []}',
        b'{"choices": [{"delta": {"content": 5}}]}',
        b'{"choices": [{"delta": {}, "text": "legacy"}]}',
        b'{"choices": [{"delta": {"role": "assistant"}, "text": "legacy"}]}',
        b'{"choices": [{"finish_reason": 3, "delta": {"content": "a"}}]}',
        b'{"usage": 4, "choices": []}',
    ]
)
_data = st.one_of(_chunk.map(orjson.dumps), _chunk.map(orjson.dumps), _odd)


def _state(r: StreamReader) -> tuple[object, ...]:
    calls = [(c.index, c.name, c.arguments, c.id) for c in r.tool_calls]
    return (
        r.chunks, r.token_chunk_ns, r.steps, r.content_chars, r.usage, r.timings,
        r.finish_reason, r.response_id, r.text, calls, r.done,
    )  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_data, min_size=1, max_size=6), min_size=1, max_size=4))
def test_a_read_of_events_is_taken_as_the_dictionary_rules_take_each_chunk(
    reads: list[list[bytes]],
) -> None:
    fast, plain = StreamReader(keep_text=True), StreamReader(keep_text=True)
    for i, read in enumerate(reads):
        now = i * 5_000_000  # reads 5 ms apart: each its own step
        try:
            if all(b"\n" not in d for d in read):
                fast.on_json_lines(b"\n".join(read), len(read), now)
            else:
                fast.on_events([Event(d) for d in read], now)
            fast_error = None
        except (ProtocolError, ServerError) as exc:
            fast_error = (type(exc), str(exc))
        plain_error = None
        for d in read:
            try:
                if d == b"[DONE]":
                    plain.done = True
                    continue
                obj = orjson.loads(d) if d[:1] == b"{" and d != b"{bad" else None
                if obj is None:
                    plain.on_event(Event(d), now)  # the errors of a chunk that is no object
                    continue
                plain.chunks += 1
                plain._take(obj, now, streamed=True)
            except (ProtocolError, ServerError) as exc:
                plain_error = (type(exc), str(exc))
                break
        assert fast_error == plain_error
        if fast_error:
            return  # a run stops at its first bad chunk
        assert _state(fast) == _state(plain)
