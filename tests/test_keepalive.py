"""The client honours the server's keep-alive terms (#17).

Against llama.cpp half the requests of a run were resent because the server had closed
the kept-alive connection: the resend counted inside the request's write time. The
server below behaves like one that drops idle connections after its ``Keep-Alive:
timeout=1``, noticing only when the next request arrives (so the client cannot see the
close coming): a request written into such a connection gets no answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import orjson
import pytest

from loadtest.model.prompt import Prompt
from loadtest.transport.client import Client, ClientConfig

_BODY = orjson.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }
)
IDLE_S = 1.0


async def _read_request(reader: asyncio.StreamReader) -> None:
    """Read one request (head and Content-Length body) off the connection."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)


class _LazyServer:
    """HTTP/1.1 keep-alive with an idle limit it enforces when the next request comes."""

    def __init__(self, header: bytes) -> None:
        self.header = header
        self.dropped = 0
        self.served = 0
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        idle_since: float | None = None
        try:
            while True:
                await _read_request(reader)
                if idle_since is not None and time.monotonic() - idle_since > IDLE_S:
                    self.dropped += 1  # expired while idle: close without an answer
                    return
                self.served += 1
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    + self.header
                    + b"Content-Length: "
                    + str(len(_BODY)).encode()
                    + b"\r\n\r\n"
                    + _BODY
                )
                await writer.drain()
                idle_since = time.monotonic()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()


@pytest.fixture
async def lazy() -> AsyncIterator[tuple[_LazyServer, str]]:
    app = _LazyServer(b"Keep-Alive: timeout=1, max=100\r\n")
    server = await asyncio.start_server(app.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield app, f"http://127.0.0.1:{port}"


_PROMPT = Prompt(id="p", source="t", category="chat", messages=({"role": "user", "content": "x"},))


async def _send_spaced(
    url: str, n: int, gap_s: float, stream: bool = False
) -> tuple[Client, list[str]]:
    outcomes = []
    async with Client(ClientConfig(base_url=url, stream=stream)) as client:
        for i in range(n):
            if i and gap_s:
                await asyncio.sleep(gap_s)
            rec = await client.send(
                index=i,
                prompt=_PROMPT,
                body=b"{}",
                intended_ns=time.perf_counter_ns(),
                warmup=False,
            )
            outcomes.append(rec.outcome)
    return client, outcomes


async def test_idle_connections_past_the_servers_timeout_are_not_reused(
    lazy: tuple[_LazyServer, str],
) -> None:
    app, url = lazy
    client, outcomes = await _send_spaced(url, 3, 1.5)
    assert outcomes == ["ok"] * 3
    assert client.stale_retries == 0
    assert app.dropped == 0 and app.served == 3


async def test_connections_within_the_timeout_are_reused(
    lazy: tuple[_LazyServer, str],
) -> None:
    app, url = lazy
    client, outcomes = await _send_spaced(url, 4, 0.05)
    assert outcomes == ["ok"] * 4
    assert client.stale_retries == 0
    assert app.connections == 1  # keep-alive still works


@pytest.mark.parametrize("header", [b"Keep-Alive: timeout=30, max=1\r\n", b"Connection: close\r\n"])
async def test_a_last_request_means_a_fresh_connection_next(header: bytes) -> None:
    app = _LazyServer(header)
    server = await asyncio.start_server(app.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        _, outcomes = await _send_spaced(f"http://127.0.0.1:{port}", 3, 0.05)
    assert outcomes == ["ok"] * 3
    assert app.connections == 3


_SSE = (
    b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


class _ClosingStreamServer:
    """Streams one SSE answer, then closes the connection at once, as llama.cpp does
    after every streamed response (its ``Keep-Alive`` header promising otherwise)."""

    def __init__(self) -> None:
        self.connections = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await _read_request(reader)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Transfer-Encoding: chunked\r\nKeep-Alive: timeout=5, max=100\r\n\r\n"
                + f"{len(_SSE):x}\r\n".encode()
                + _SSE
                + b"\r\n0\r\n\r\n"
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()


async def test_a_server_that_closes_after_each_stream_gets_no_request_into_a_closing_socket() -> (
    None
):
    app = _ClosingStreamServer()
    server = await asyncio.start_server(app.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        # Back to back, as a closed loop at concurrency 1 sends them: the next request
        # starts before the loop has read the previous connection's close.
        client, outcomes = await _send_spaced(f"http://127.0.0.1:{port}", 8, 0, stream=True)
    assert outcomes == ["ok"] * 8
    # The first close teaches the client (its request may be resent); none after it.
    assert client.stale_retries <= 1
    assert app.connections == 8  # one each: the server answers one request per connection
