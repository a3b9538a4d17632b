"""Reading a response: an event stream chunk by chunk, or a size-bounded body.

The hot path: one ``perf_counter_ns``, one deadline store and the parser per read.
Token times are arrival stamps (``loadtest._compat.arrivals``), not the reader's clock.
"""

from __future__ import annotations

import time

import aiohttp

from loadtest._compat.arrivals import arrival_stamps
from loadtest.errors import ProtocolError
from loadtest.protocol.openai import StreamReader
from loadtest.protocol.sse import SSEParser
from loadtest.transport.config import MAX_BODY_BYTES, STREAM_TYPES
from loadtest.transport.flight import Flight, InjectedCancel

__all__ = ["StreamCut", "not_a_stream", "read_bounded", "read_stream"]

_perf = time.perf_counter_ns
_SHOWN = 60
"""Characters of a body that is no event stream quoted in its error."""


class StreamCut(ConnectionError):
    """The stream ended (the connection closed cleanly) before ``[DONE]`` (chat,
    completions) or ``response.completed`` (responses)."""


async def read_stream(
    resp: aiohttp.ClientResponse,
    reader: StreamReader,
    flight: Flight,
    between_ns: int,
    max_event_bytes: int,
) -> None:
    """Feed the event stream of ``resp`` to ``reader``, stamping each read's arrival.

    Raises ``ProtocolError`` for a body that is no event stream, ``StreamCut`` for a
    stream that ended before its end mark (``reader.END_MARK``), and ``InjectedCancel``
    where ``flight`` asked to cancel after some tokens.
    """
    ctype = resp.content_type
    if ctype not in STREAM_TYPES:
        await not_a_stream(resp, ctype)
    parser = SSEParser(max_event_bytes)
    between = between_ns
    feed = parser.feed_json
    on_events = reader.on_events
    on_json = reader.on_json_lines
    stamps = arrival_stamps(resp)
    reader.client_lag_ns = lag = 0
    head = b""  # the body's first bytes: what a stream that is no SSE is said to hold
    async for data in resp.content.iter_any():
        if not head:
            head = data[:_SHOWN]
        now = _perf()
        at = now if stamps is None else stamps.rx_ns
        if now - at > lag:
            reader.client_lag_ns = lag = now - at
        # The first-byte timeout runs until the first *data*, not the headers: many
        # servers send headers at once and the first chunk only after prefill.
        flight.deadline_ns = now + between
        flight.phase = "between chunks"
        before, body, count, after = feed(data)
        if before:
            on_events(before, at)
        if count:
            on_json(body, count, at)
        if after:
            on_events(after, at)
        stop_at = flight.cancel_after_tokens
        if stop_at is not None and len(reader.token_chunk_ns) >= stop_at:
            flight.cancel_ns = _perf()
            resp.close()  # drop the connection, as a user closing the tab would
            raise InjectedCancel
    if not reader.done and not reader.chunks and (parser.pending or parser.lines):
        raise ProtocolError(_no_events(parser, head))
    if not reader.done and (parser.pending or reader.finish_reason is None):
        raise StreamCut(f"stream ended before {reader.END_MARK}")


def _no_events(parser: SSEParser, head: bytes) -> str:
    """Why a body gave no event, with what it began with: a lone ``data: {...`` line cut
    before its end was "the stream had 0 lines but no `data:` events; is it SSE?"."""
    text = head.decode("utf-8", "replace")
    shown = repr(text) + ("..." if len(head) >= _SHOWN else "")
    if parser.held_bytes and not parser.lines:
        why = f"ended inside its first line ({parser.held_bytes} bytes, no line end)"
    elif parser.pending:
        why = "ended inside its first event (no blank line after its data)"
    else:
        return (
            f"the body had {parser.lines} line{'s' * (parser.lines != 1)} but no `data:` "
            f"events, so it is no event stream; it began {shown}"
        )
    return f"the stream {why}, so it held no event; it began {shown}"


async def not_a_stream(resp: aiohttp.ClientResponse, ctype: str) -> None:
    """Raise the right error for a 2xx answer to ``stream: true`` that is no stream."""
    if ctype == "application/json":
        reader = StreamReader()
        reader.on_body(await read_bounded(resp), _perf())  # an error object raises here
        raise ProtocolError(
            "the server answered stream=true with one JSON body; does it support streaming?"
        )
    raise ProtocolError(f"expected text/event-stream, got content type {ctype!r}")


async def read_bounded(resp: aiohttp.ClientResponse) -> bytes:
    body = await resp.content.read(MAX_BODY_BYTES + 1)
    while len(body) <= MAX_BODY_BYTES and not resp.content.at_eof():
        more = await resp.content.read(MAX_BODY_BYTES + 1 - len(body))
        if not more:
            break
        body += more
    if len(body) > MAX_BODY_BYTES:
        raise ProtocolError(f"response body exceeds {MAX_BODY_BYTES} bytes")
    return body
