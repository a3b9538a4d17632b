"""The reasoning split without a server: ``<think>`` tags cut anywhere, fields, usage.

The readers hand ``ThinkSplit`` each chunk as it arrives; these tests feed the chat
reader SSE chunks directly, so the cuts can be every cut there is, not the simulator's.
"""

from __future__ import annotations

import itertools

import orjson
import pytest

from loadtest.protocol.openai import StreamReader
from loadtest.protocol.reasoning import ThinkSplit, reported_reasoning
from loadtest.protocol.responses import ResponsesReader
from loadtest.protocol.sse import Event

THINK = "<think>\nthe plan\n</think>"
ANSWER = "\n\nIt is so."
TEXT = THINK + ANSWER


def _delta(**fields: object) -> Event:
    return Event(orjson.dumps({"id": "r", "choices": [{"index": 0, "delta": fields}]}))


def _read(pieces: list[str]) -> StreamReader:
    reader = StreamReader()
    for i, piece in enumerate(pieces):
        reader.on_event(_delta(content=piece), 1000 * (i + 1))
    return reader


def _cuts(text: str, parts: int) -> list[list[str]]:
    """Every way to cut ``text`` into ``parts`` non-empty pieces."""
    out = []
    for cuts in itertools.combinations(range(1, len(text)), parts - 1):
        bounds = (0, *cuts, len(text))
        out.append([text[a:b] for a, b in itertools.pairwise(bounds)])
    return out


@pytest.mark.parametrize("parts", [1, 2, 3])
def test_think_tags_cut_anywhere_are_found(parts: int) -> None:
    # Every cut into up to three chunks (~700 streams): the reasoning is the chunks that
    # hold any of "<think>...</think>", the answer begins with the first chunk holding
    # text after it that is not whitespace alone.
    think_end = len(THINK)
    first_text = TEXT.index("I")
    for pieces in _cuts(TEXT, parts):
        reader = _read(pieces)
        split = reader.split.result(reader.token_chunk_ns, None, len(pieces))
        assert split is not None and split.way == "think-tags", pieces
        starts = list(itertools.accumulate([0] + [len(p) for p in pieces]))
        holding_think = [i for i in range(len(pieces)) if starts[i] < think_end]
        answer = next(i for i in range(len(pieces)) if starts[i + 1] > first_text)
        assert split.chunks == len(holding_think), pieces
        assert split.first_ns == 1000 and split.last_ns == 1000 * (holding_think[-1] + 1)
        assert split.answer_ns == 1000 * (answer + 1), pieces
        assert reader.split.chars == think_end, pieces


def test_text_without_tags_is_the_answer_from_its_first_chunk() -> None:
    for pieces in (["Hello", " there"], ["  ", "<thinking", " aloud"], ["<th", "e end"], [" "]):
        reader = _read(pieces)
        assert reader.split.result(reader.token_chunk_ns, None, 2) is None
        assert not reader.split.scanning or pieces == [" "]  # held to the end: still open
        assert reader.split.answer_at in (0, -1)


def test_reasoning_fields_then_whitespace_then_the_answer() -> None:
    reader = StreamReader()
    reader.on_event(_delta(reasoning="a", reasoning_content="a"), 1000)  # vLLM's pair: once
    reader.on_event(_delta(reasoning_content=" b"), 2000)
    reader.on_event(_delta(content="\n\n"), 3000)  # between the parts: neither
    reader.on_event(_delta(content="Yes"), 4000)
    reader.on_event(_delta(content=" indeed"), 5000)
    usage = {"completion_tokens": 5, "completion_tokens_details": {"reasoning_tokens": 2}}
    split = reader.split.result(reader.token_chunk_ns, usage, 5)
    assert split is not None and split.way == "field"
    assert (split.first_ns, split.last_ns, split.answer_ns) == (1000, 2000, 4000)
    assert (split.chunks, split.answer_chunks, split.reasoning_ns) == (2, 2, 3000)
    assert split.tokens == split.reported == 2 and not split.disagree
    assert reader.split.chars == 3


def test_a_tool_call_begins_the_answer() -> None:
    reader = StreamReader()
    reader.on_event(_delta(reasoning_content="think"), 1000)
    call = {"index": 0, "id": "c", "function": {"name": "f", "arguments": "{}"}}
    reader.on_event(_delta(tool_calls=[call]), 2000)
    split = reader.split.result(reader.token_chunk_ns, None, 2)
    assert split is not None and split.answer_ns == 2000
    assert reader.tool_calls[0].arguments == "{}"  # the call alone, no think text


@pytest.mark.parametrize(
    ("reported", "disagree"),
    [(3, False), (6, False), (2, True), (7, True), (0, True)],
)
def test_a_reported_count_no_stream_could_give_is_flagged(reported: int, disagree: bool) -> None:
    # 3 chunks of reasoning, 2 of answer, 8 tokens: reasoning is 3..6 tokens.
    reader = StreamReader()
    for t in range(3):
        reader.on_event(_delta(reasoning_content="r"), 1000 * (t + 1))
    for t in range(2):
        reader.on_event(_delta(content="a"), 5000 + 1000 * t)
    usage = {"completion_tokens": 8, "completion_tokens_details": {"reasoning_tokens": reported}}
    split = reader.split.result(reader.token_chunk_ns, usage, 8)
    assert split is not None and split.disagree is disagree
    assert split.counted == round(8 * 3 / 5)


def test_usage_of_either_api_is_read() -> None:
    assert reported_reasoning({"output_tokens_details": {"reasoning_tokens": 4}}) == 4
    assert reported_reasoning({"completion_tokens_details": {"reasoning_tokens": True}}) is None
    assert reported_reasoning(None) is None


def test_responses_reasoning_events_are_reasoning() -> None:
    reader = ResponsesReader()

    def event(kind: str, **rest: object) -> Event:
        return Event(orjson.dumps({"type": kind, **rest}), event=kind)

    reader.on_event(event("response.reasoning_text.delta", delta="hmm"), 1000)
    reader.on_event(event("response.reasoning_summary_text.delta", delta=" so"), 2000)
    reader.on_event(event("response.output_text.delta", delta="Done"), 3000)
    split = reader.split.result(reader.token_chunk_ns, None, 3)
    assert split is not None and split.way == "field"
    assert (split.chunks, split.answer_ns) == (2, 3000)


def test_a_fresh_split_scans_until_the_answer() -> None:
    split = ThinkSplit()
    assert split.scanning
    split.content("Hi", 1, 0)
    assert not split.scanning and split.answer_at == 0


def test_the_readers_fast_path_splits_as_its_event_path() -> None:
    # One read of many text chunks goes through on_json_lines, which takes plain text
    # without a look; until the answer has begun it must hand content to the split.
    for pieces in _cuts(TEXT, 3)[::7]:
        lines = [
            orjson.dumps({"id": "r", "choices": [{"index": 0, "delta": {"content": p}}]})
            for p in pieces
        ]
        fast = StreamReader()
        fast.on_json_lines(b"\n".join(lines[:2]), 2, 1000)
        fast.on_json_lines(lines[2], 1, 2000)
        slow = StreamReader()
        slow.on_events([Event(line) for line in lines[:2]], 1000)
        slow.on_event(Event(lines[2]), 2000)
        a = fast.split.result(fast.token_chunk_ns, None, 3)
        b = slow.split.result(slow.token_chunk_ns, None, 3)
        assert a == b and a is not None, pieces
