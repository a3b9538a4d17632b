"""llama.cpp's prefill read off a run: the stall share and the prefill's line."""

from __future__ import annotations

import itertools

import pytest

from loadtest.app.engines.twin_prefill import Window, prefill_line, stall_share

STEP = {1: 14.0, 2: 50.0}
"""The fitted step by streams decoding: llama.cpp's here was 13 ms alone, ~50 with two."""


def _stream(gaps: list[float]) -> Window:
    """A stream decoding from t=0 with these gaps between its tokens."""
    chunks = tuple(itertools.accumulate(gaps, initial=0.0))
    return Window(
        first_ms=0.0, end_ms=chunks[-1], prompt_ms=100.0, gaps=len(gaps), chunks_ms=chunks
    )


# Another prompt's 300 ms prefill, from 500 ms to its first token at 800 ms.
NEW = Window(first_ms=800.0, end_ms=1300.0, prompt_ms=300.0, gaps=10, tokens=40)
BEFORE = [50.0] * 10  # two streams decoding until the prefill starts at 500 ms


def test_the_share_leaves_the_twin_stream_with_the_tokens_llama_cpp_had() -> None:
    # The twin holds one gap by the share of the prefill on a 1-stream step, then steps
    # on at 14 ms until the prefill is over (806 ms), then beside the new stream.
    twin = _stream([*BEFORE, 14.0 + 0.6 * 300, *[14.0] * 8, 50.0, 50.0])
    assert stall_share([(twin, NEW)], STEP.__getitem__) == pytest.approx(0.6)
    # llama.cpp decodes two fast steps beside the starting slot, then waits out the
    # rest of the prefill: its third token in it comes at 800 ms. The twin at the share
    # read off it holds its first for 14 + 258 ms, and its third comes at 800 ms too.
    llama = _stream([*BEFORE, 14.0, 14.0, 272.0, 50.0, 50.0])
    assert stall_share([(llama, NEW)], STEP.__getitem__) == pytest.approx(0.86)
    # Less the stream's median gap (50), the fast steps would count as a negative
    # stall, and the share would be 0.5.


def test_a_prefill_outside_a_decode_tells_nothing_about_the_stall() -> None:
    late = Window(first_ms=2000.0, end_ms=2500.0, prompt_ms=300.0, gaps=10)
    assert stall_share([(_stream(BEFORE), late)], STEP.__getitem__) is None


def _prefill(start: float, tokens: int, prompt_ms: float) -> Window:
    first = start + prompt_ms
    return Window(first_ms=first, end_ms=first + 400.0, prompt_ms=prompt_ms, gaps=8, tokens=tokens)


def test_the_prefill_line_is_read_off_the_prefills_that_ran_alone() -> None:
    # Lone prefills on 100 ms + 2 ms a token, each after the one before is done.
    alone = [_prefill(1000.0 * i, t, 100.0 + 2.0 * t) for i, t in enumerate((10, 40, 70, 100))]
    # One while the last one decodes (3300-3700 ms): its step carried that token too.
    beside = _prefill(3500.0, 60, 400.0)
    assert prefill_line([(*alone, beside)]) == pytest.approx((100.0, 2.0))
    # With too few lone ones, the prefills beside a decode are used rather than none.
    assert prefill_line([(*alone[1:], beside)]) is not None
    assert prefill_line([tuple(alone[1:])]) is None  # three are too few for a line
