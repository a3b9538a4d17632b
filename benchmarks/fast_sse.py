"""A deliberately fast OpenAI-style SSE server, for measuring a client's ingest (not a test).

    python -m benchmarks.fast_sse --port 18500 [--cpu 1] [--events-per-write 16]

Every ``/v1/chat/completions`` request with ``stream: true`` gets ``max_tokens`` token
events (one token each), a finish event with usage, and ``[DONE]``, on a kept-alive
HTTP/1.1 connection (chunked transfer coding, as real engines send). The events are
built once per length and written ``--events-per-write`` at a time, each batch one HTTP
chunk, so that a client's reads hold several events, as they do from a busy engine;
the server does nothing else per token, so it is not what limits a client's rate.
``/v1/models`` answers with one model, so a client's model discovery works.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from functools import cache
from typing import cast

import orjson

_MODEL = "fast-sse"
_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)


def _event(obj: object) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _chunk(delta: dict[str, object], finish: str | None = None) -> dict[str, object]:
    return {
        "id": "chatcmpl-fast",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": _MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


@cache
def response_body(tokens: int, per_write: int) -> bytes:
    """The whole chunked body of a stream of ``tokens`` token events."""
    events = [_event(_chunk({"role": "assistant", "content": ""}))]
    events += [_event(_chunk({"content": f" t{i % 97}"})) for i in range(tokens)]
    last = _chunk({}, "length")
    last["usage"] = {"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": tokens + 8}
    events += [_event(last), b"data: [DONE]\n\n"]
    out = bytearray()
    for i in range(0, len(events), per_write):
        data = b"".join(events[i : i + per_write])
        out += b"%x\r\n%s\r\n" % (len(data), data)
    return bytes(out + b"0\r\n\r\n")


def _json(status: str, obj: object) -> bytes:
    body = orjson.dumps(obj)
    return (
        f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


class _Conn(asyncio.Protocol):
    def __init__(self, per_write: int) -> None:
        self.buf = b""
        self.per_write = per_write
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while True:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buf[:end].decode("latin-1")
            length = 0
            for line in head.split("\r\n")[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buf) < end + 4 + length:
                return
            body = self.buf[end + 4 : end + 4 + length]
            self.buf = self.buf[end + 4 + length :]
            self._answer(head.split(" ", 2)[1], body)

    def _answer(self, path: str, body: bytes) -> None:
        assert self.transport is not None
        if path.startswith("/v1/models"):
            self.transport.write(_json("200 OK", {"data": [{"id": _MODEL, "object": "model"}]}))
        elif path.startswith("/v1/chat/completions"):
            req = orjson.loads(body)
            tokens = int(req.get("max_completion_tokens") or req.get("max_tokens") or 16)
            self.transport.write(_HEAD + response_body(tokens, self.per_write))
        else:
            self.transport.write(_json("404 Not Found", {"error": {"message": "not found"}}))


async def serve(port: int, per_write: int) -> None:
    """Serve on 127.0.0.1:``port`` until SIGTERM or SIGINT."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: _Conn(per_write), "127.0.0.1", port, backlog=4096, reuse_address=True
    )
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"fast_sse listening on 127.0.0.1:{port}", flush=True)
    async with server:
        await stop.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--port", type=int, default=18500)
    ap.add_argument("--cpu", type=int, help="pin the server to this core")
    ap.add_argument("--events-per-write", type=int, default=16)
    args = ap.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass
    asyncio.run(serve(args.port, args.events_per_write))


if __name__ == "__main__":
    main()
