"""Every recorded transcript in fixtures/ through the parser and the chunk reader."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadtest.errors import ProtocolError
from loadtest.protocol.openai import ServerError, StreamReader
from loadtest.protocol.responses import ResponsesReader
from loadtest.protocol.sse import SSEParser

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
EXPECTED: dict[str, Any] = orjson.loads((FIXTURES / "expected.json").read_bytes())


def replay(
    data: bytes, pieces: int, seed: int, api: str = "chat"
) -> tuple[StreamReader, SSEParser]:
    rng = random.Random(seed)
    cuts = sorted(rng.randrange(len(data) + 1) for _ in range(pieces))
    parser = SSEParser()
    reader = ResponsesReader() if api == "responses" else StreamReader()
    prev = 0
    for t, cut in enumerate([*cuts, len(data)]):
        for ev in parser.feed(data[prev:cut]):
            reader.on_event(ev, t)
        prev = cut
    return reader, parser


def test_every_fixture_has_an_expectation() -> None:
    assert sorted(p.name for p in FIXTURES.glob("*.sse")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("pieces", [0, 3, 40])
def test_fixture_replays_to_the_expected_result(name: str, pieces: int) -> None:
    want = EXPECTED[name]
    data = (FIXTURES / name).read_bytes()
    if "error" in want:
        exc = {"ServerError": ServerError, "ProtocolError": ProtocolError}[want["error"]]
        with pytest.raises(exc) as info:
            replay(data, pieces, seed=pieces)
        if "message" in want:
            assert want["message"] in str(info.value)
        return
    reader, parser = replay(data, pieces, seed=pieces, api=want.get("api", "chat"))
    assert reader.done is want["done"]
    assert len(reader.token_chunk_ns) == want["token_chunks"]
    assert reader.content_chars == want["content_chars"]
    assert reader.output_tokens() == (want["output_tokens"], want["estimated"])
    assert reader.finish_reason == want["finish_reason"]
    assert [[c.name, c.arguments] for c in reader.tool_calls] == want["tool_calls"]
    if "comments" in want:
        assert parser.comments == want["comments"]
