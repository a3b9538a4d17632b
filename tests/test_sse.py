"""The sans-IO SSE parser: the standard's line rules, and split-independence."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadtest.errors import ProtocolError
from loadtest.protocol.sse import Event, SSEParser


def parse_all(chunks: list[bytes]) -> list[Event]:
    p = SSEParser()
    out: list[Event] = []
    for c in chunks:
        out += p.feed(c)
    return out


def test_data_lines_events_and_done() -> None:
    stream = b'data: {"a":1}\n\ndata: [DONE]\n\n'
    assert parse_all([stream]) == [Event(b'{"a":1}'), Event(b"[DONE]")]


def test_multi_line_data_is_joined_with_newline() -> None:
    assert parse_all([b"data: one\ndata: two\ndata:three\n\n"]) == [Event(b"one\ntwo\nthree")]


def test_comments_are_counted_and_skipped() -> None:
    p = SSEParser()
    events = p.feed(b": keep-alive\n\n:ping\ndata: x\n\n")
    assert events == [Event(b"x")]
    assert p.comments == 2


def test_crlf_and_lone_cr_line_endings() -> None:
    assert parse_all([b"data: a\r\n\r\ndata: b\r\rdata: c\n\n"]) == [
        Event(b"a"),
        Event(b"b"),
        Event(b"c"),
    ]


def test_crlf_split_between_reads_does_not_make_an_extra_blank_line() -> None:
    # "data: a\r" + "\ndata: b\r\n\r\n": the \r\n pair straddles two reads.
    assert parse_all([b"data: a\r", b"\ndata: b\r\n\r\n"]) == [Event(b"a\nb")]


def test_event_type_and_id() -> None:
    events = parse_all([b'event: error\nid: 7\ndata: {"error":"boom"}\n\ndata: x\n\n'])
    assert events[0] == Event(b'{"error":"boom"}', "error", "7")
    assert events[1] == Event(b"x", "message", "7")  # the last id persists


def test_blank_line_without_data_dispatches_nothing() -> None:
    assert parse_all([b"event: ping\n\n\n\n"]) == []


def test_unfinished_event_is_pending() -> None:
    p = SSEParser()
    p.feed(b"data: half")
    assert p.pending
    p.feed(b"\n\n")
    assert not p.pending


def test_retry_field_and_unknown_fields() -> None:
    p = SSEParser()
    assert p.feed(b"retry: 1500\nfoo: bar\ndata: y\n\n") == [Event(b"y")]
    assert p.retry_ms == 1500


_line = st.one_of(
    st.builds(
        lambda s: b"data: " + s,
        st.binary(max_size=20).filter(lambda b: b"\n" not in b and b"\r" not in b),
    ),
    st.just(b": keep-alive"),
    st.just(b"event: error"),
    st.just(b"data: [DONE]"),
    st.just(b""),
)


@st.composite
def stream_and_splits(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    lines = draw(st.lists(_line, max_size=30))
    ending = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    data = ending.join(lines) + ending + ending
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    return data, cuts


@given(stream_and_splits())
def test_any_split_of_the_same_bytes_yields_the_same_events(
    case: tuple[bytes, list[int]],
) -> None:
    data, cuts = case
    whole = parse_all([data])
    pieces = []
    prev = 0
    for c in cuts:
        pieces.append(data[prev:c])
        prev = c
    pieces.append(data[prev:])
    assert parse_all(pieces) == whole
    assert parse_all([bytes([b]) for b in data]) == whole


def test_a_line_longer_than_the_limit_is_a_protocol_error() -> None:
    p = SSEParser(max_event_bytes=1000)
    assert p.feed(b"data: " + b"x" * 500) == []
    with pytest.raises(ProtocolError, match="exceeds 1000 bytes"):
        p.feed(b"x" * 600)


def test_an_event_of_many_lines_over_the_limit_is_a_protocol_error() -> None:
    p = SSEParser(max_event_bytes=1000)
    for _ in range(9):
        p.feed(b"data: " + b"y" * 100 + b"\n")
    with pytest.raises(ProtocolError, match="data exceeds 1000 bytes"):
        p.feed(b"data: " + b"y" * 100 + b"\n")


def test_events_under_the_limit_pass_and_reset_the_count() -> None:
    p = SSEParser(max_event_bytes=1000)
    for _ in range(50):
        assert p.feed(b"data: " + b"z" * 900 + b"\n\n") == [Event(b"z" * 900)]


def test_an_empty_read_between_cr_and_lf_does_not_split_the_line_ending() -> None:
    # Found by the property test above: the empty read used to forget the pending CR,
    # so the LF after it ended an empty line and dispatched an event without its type.
    p = SSEParser()
    events = [*p.feed(b"event: error\r"), *p.feed(b""), *p.feed(b"\ndata: [DONE]\r\n\r\n")]
    assert [(e.event, e.data) for e in events] == [("error", b"[DONE]")]


def _reference(data: bytes) -> tuple[list[Event], int, int]:
    """The WHATWG rules line by line, written plainly: the oracle for the fast path."""
    events: list[Event] = []
    buf: list[bytes] = []
    event, last_id, lines, comments = "", None, 0, 0
    for line in data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")[:-1]:
        lines += 1
        if not line:
            if buf:
                events.append(Event(b"\n".join(buf), event or "message", last_id))
                buf = []
            event = ""
        elif line.startswith(b":"):
            comments += 1
        else:
            name, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if name == b"data":
                buf.append(value)
            elif name == b"event":
                event = value.decode("utf-8", "replace")
            elif name == b"id" and b"\0" not in value:
                last_id = value.decode("utf-8", "replace")
    return events, lines, comments


_any_line = st.one_of(
    _line,
    st.just(b"id: 7"),
    st.just(b"data:tight"),
    st.just(b"retry: 50"),
    st.just(b"data"),
)


@given(st.lists(_any_line, max_size=40), st.lists(st.integers(0, 2000), max_size=8))
def test_the_parser_agrees_with_the_line_by_line_rules_however_the_bytes_arrive(
    lines: list[bytes], cuts: list[int]
) -> None:
    data = b"\n".join(lines) + b"\n\n"
    p = SSEParser()
    got: list[Event] = []
    prev = 0
    for c in [*sorted(min(c, len(data)) for c in cuts), len(data)]:
        got += p.feed(data[prev:c])
        prev = c
    assert (got, p.lines, p.comments) == _reference(data)


@given(st.lists(_any_line, max_size=40), st.lists(st.integers(0, 2000), max_size=8))
def test_feed_json_gives_the_same_events_as_json_lines_and_events(
    lines: list[bytes], cuts: list[int]
) -> None:
    data = b"\n".join(lines) + b"\n\n"
    p = SSEParser()
    got: list[Event] = []
    prev = 0
    for c in [*sorted(min(c, len(data)) for c in cuts), len(data)]:
        before, body, count, after = p.feed_json(data[prev:c])
        got += before
        if count:
            got += [Event(d) for d in body.split(b"\n")]
            assert len(body.split(b"\n")) == count
        got += after
        prev = c
    ref_events, ref_lines, ref_comments = _reference(data)
    # Events of the JSON lines carry no id (the reader reads none): compare the rest.
    assert [(e.data, e.event) for e in got] == [(e.data, e.event) for e in ref_events]
    assert (p.lines, p.comments) == (ref_lines, ref_comments)


def test_feed_json_joins_a_read_of_data_events_and_leaves_the_end_mark_to_feed() -> None:
    p = SSEParser()
    got = p.feed_json(b'data: {"a":1}\n\ndata: {"b":2}\n\ndata: [DONE]\n\n')
    assert got == ([], b'{"a":1}\n{"b":2}', 2, [Event(b"[DONE]")])
    # Not every whole event is a data line: all of it by feed, the last line held.
    got = p.feed_json(b'data: {"c":3}\n\nevent: error\ndata: x\n\ndata: {"d"')
    assert got == ([Event(b'{"c":3}'), Event(b"x", "error")], b"", 0, [])
    assert p.pending
    # The held event is finished first, then the read's own events are joined.
    got = p.feed_json(b':1}\n\ndata: {"e":5}\n\ndata: {"f":6}\n\n')
    assert got == ([Event(b'{"d":1}')], b'{"e":5}\n{"f":6}', 2, [])


@st.composite
def long_lines_and_splits(draw: st.DrawFn) -> tuple[bytes, list[int]]:
    # Lines on both sides of the parser's long-line threshold (1024), mixed with short
    # ones, so that both ways of cutting lines (find and split) meet any read boundary.
    sizes = draw(st.lists(st.sampled_from([0, 5, 1023, 1024, 1025, 3000]), max_size=8))
    lines = [b"data: " + bytes([97 + i % 26]) * n for i, n in enumerate(sizes)]
    ending = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    data = b"".join(line + ending + (ending if i % 2 else b"") for i, line in enumerate(lines))
    data += ending + ending
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    return data, cuts


@given(long_lines_and_splits())
def test_long_lines_split_anywhere_yield_the_same_events(case: tuple[bytes, list[int]]) -> None:
    data, cuts = case
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    whole = parse_all([data])
    assert parse_all(pieces) == whole
    # The events are the lines' own bytes: as split by hand, with any line ending.
    norm = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    expected = [
        Event(b"\n".join(x[6:] for x in block.split(b"\n")))
        for block in norm.split(b"\n\n")
        if block.strip(b"\n")
    ]
    assert whole == expected


def test_a_256_kb_line_in_small_reads_passes_and_only_its_tail_is_held() -> None:
    line = b'data: {"x":"' + b"y" * (256 << 10) + b'"}'
    p = SSEParser()
    events: list[Event] = []
    for i in range(0, len(line), 4096):
        events += p.feed(line[i : i + 4096])
        assert p.held_bytes == min(i + 4096, len(line))
    events += p.feed(b"\n\n")
    assert events == [Event(line[6:])]
    assert p.held_bytes == 0
    assert not p.pending
