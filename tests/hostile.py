"""A hostile OpenAI-compatible endpoint: every way a server can break a stream.

The misbehaviour is chosen by the first path segment, so one server serves them all:
``http://127.0.0.1:PORT/<mode>`` is an endpoint base URL (loadtest appends
``/v1/chat/completions``, or ``/v1/responses`` for the ``resp-*`` modes, which break
the Responses API's event stream). It runs on its own event loop in a thread, so that
synchronous code under test (``run_job`` calls ``asyncio.run``) can use it; the same
app also listens with TLS on a certificate from a private CA (``trustme``).
"""

from __future__ import annotations

import asyncio
import gzip
import os
import socket
import ssl
import struct
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import trustme
from aiohttp import web

__all__ = ["ECHO_MODES", "HEALTH_ANSWERS", "HEALTH_BROKEN", "MODES", "HostileServer"]

ECHO_MODES = ("echo-auth-status", "echo-auth-event")
"""Modes that repeat the Authorization header back (in a 401 body, in an error event)."""


def _chunk(text: str, finish: str | None = None) -> bytes:
    obj = {
        "id": "hostile-1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(obj) + b"\n\n"


_USAGE = b'data: {"id":"hostile-1","choices":[],"usage":{"completion_tokens":3}}\n\n'
_GOOD = _chunk("a") + _chunk("b") + _chunk("c", "stop") + _USAGE + b"data: [DONE]\n\n"


def _event(obj: dict[str, Any]) -> bytes:
    """One Responses API event: its type both as the SSE event name and in the data."""
    return b"event: " + str(obj["type"]).encode() + b"\ndata: " + orjson.dumps(obj) + b"\n\n"


def _delta(text: str) -> bytes:
    return _event({"type": "response.output_text.delta", "item_id": "msg_1", "delta": text})


_R_OPEN = _event({"type": "response.created", "response": {"id": "resp_h1"}}) + _event(
    {"type": "response.output_item.added", "item": {"type": "message", "id": "msg_1"}}
)
_R_DONE = _event(
    {
        "type": "response.completed",
        "response": {
            "id": "resp_h1",
            "status": "completed",
            "usage": {"input_tokens": 2, "output_tokens": 3},
        },
    }
)
_R_GOOD = _R_OPEN + _delta("a") + _delta("b") + _delta("c") + _R_DONE

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def _stream(request: web.Request, ctype: str = "text/event-stream") -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": ctype, "Cache-Control": "no-cache"})
    await resp.prepare(request)
    return resp


async def _write_all(
    request: web.Request, body: bytes, ctype: str = "text/event-stream"
) -> web.StreamResponse:
    resp = await _stream(request, ctype)
    await resp.write(body)
    await resp.write_eof()
    return resp


async def ok(request: web.Request) -> web.StreamResponse:
    return await _write_all(request, _GOOD)


async def invalid_json(request: web.Request) -> web.StreamResponse:
    return await _write_all(request, _chunk("a") + b"data: {not json\n\n" + _GOOD)


async def no_data_prefix(request: web.Request) -> web.StreamResponse:
    # NDJSON where SSE was promised: every line lacks "data: ".
    body = b"".join(c.removeprefix(b"data: ") for c in (_chunk("a"), _chunk("b", "stop")))
    return await _write_all(request, body)


async def no_done(request: web.Request) -> web.StreamResponse:
    # Finished (finish_reason and usage) but never says [DONE]: lenient servers do this.
    return await _write_all(request, _chunk("a") + _chunk("b", "stop") + _USAGE)


async def truncated(request: web.Request) -> web.StreamResponse:
    # Ends cleanly at the TCP level in the middle of an answer.
    return await _write_all(request, _chunk("a") + _chunk("b"))


async def huge_line(request: web.Request) -> web.StreamResponse:
    resp = await _stream(request)
    await resp.write(_chunk("a"))
    piece = b"x" * 65536
    try:
        await resp.write(b'data: {"pad":"')
        for _ in range(160):  # 10 MB without a line end
            await resp.write(piece)
        await resp.write(b'"}\n\n' + _GOOD)
        await resp.write_eof()
    except (ConnectionError, RuntimeError):
        pass  # the client gave up first, as it should
    return resp


async def binary(request: web.Request) -> web.StreamResponse:
    garbage = os.urandom(4096).replace(b"\n", b"\x00").replace(b"\r", b"\x00")
    return await _write_all(request, garbage + b"\n\n" + garbage)


async def wrong_type(request: web.Request) -> web.StreamResponse:
    return await _write_all(request, b"<html><body>Welcome to nginx!</body></html>", "text/html")


async def html_as_sse(request: web.Request) -> web.StreamResponse:
    # A proxy's error page under the stream's own content type.
    page = b"<!DOCTYPE html>\n<html><body><h1>502 Bad Gateway</h1></body></html>\n"
    return await _write_all(request, page)


async def empty_stream(request: web.Request) -> web.StreamResponse:
    return await _write_all(request, b"")


async def unterminated_data(request: web.Request) -> web.StreamResponse:
    # One data line, cut before its end: no line, no event.
    return await _write_all(request, _chunk("a")[:40])


async def cut_mid_event(request: web.Request) -> web.StreamResponse:
    # A clean close inside an event: its data line has no end.
    return await _write_all(request, _chunk("a") + _chunk("b")[:25])


async def not_object(request: web.Request) -> web.StreamResponse:
    # JSON, but not the object a chunk is: a list, a string, a number.
    return await _write_all(request, b'data: [1, 2]\n\ndata: "a"\n\ndata: 7\n\n' + _GOOD)


async def error_event(request: web.Request) -> web.StreamResponse:
    err = b'event: error\ndata: {"error":{"message":"model overloaded","code":503}}\n\n'
    return await _write_all(request, _chunk("a") + err)


async def error_in_chunk(request: web.Request) -> web.StreamResponse:
    return await _write_all(request, _chunk("a") + b'data: {"error":{"message":"OOM"}}\n\n')


async def rate_limited(request: web.Request) -> web.StreamResponse:
    return web.json_response(
        {"error": {"message": "slow down"}}, status=429, headers={"Retry-After": "1"}
    )


async def http_500(request: web.Request) -> web.StreamResponse:
    return web.Response(status=500, text="internal error")


async def http_503(request: web.Request) -> web.StreamResponse:
    return web.Response(status=503, text="service unavailable", headers={"Retry-After": "5"})


async def slowloris(request: web.Request) -> web.StreamResponse:
    resp = await _stream(request)
    try:
        for byte in _GOOD * 100:
            await resp.write(bytes([byte]))
            await asyncio.sleep(0.25)
    except (ConnectionError, RuntimeError):
        pass
    return resp


async def reset(request: web.Request) -> web.StreamResponse:
    resp = await _stream(request)
    await resp.write(_chunk("a") + _chunk("b"))
    await asyncio.sleep(0.05)
    _abort(request)
    return resp


async def endless(request: web.Request) -> web.StreamResponse:
    # Tokens forever: only the total timeout ends it.
    resp = await _stream(request)
    try:
        while True:
            await resp.write(_chunk("z"))
            await asyncio.sleep(0.02)
    except (ConnectionError, RuntimeError):
        pass
    return resp


async def stall(request: web.Request) -> web.StreamResponse:
    resp = await _stream(request)
    await resp.write(_chunk("a"))
    await asyncio.sleep(30)
    return resp


_SEEN = web.AppKey("seen", list[int])


async def stall_first(request: web.Request) -> web.StreamResponse:
    # The server's first request stalls (a warm-up caught in a slow start); the rest
    # are answered at once.
    seen = request.app[_SEEN]
    seen.append(1)
    if len(seen) == 1:
        return await stall(request)
    return await ok(request)


async def double_done(request: web.Request) -> web.StreamResponse:
    return await _write_all(request, _GOOD + b"data: [DONE]\n\n")


async def gzipped(request: web.Request) -> web.StreamResponse:
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}
    )
    await resp.prepare(request)
    await resp.write(gzip.compress(_GOOD))
    await resp.write_eof()
    return resp


async def redirect(request: web.Request) -> web.StreamResponse:
    raise web.HTTPTemporaryRedirect("/ok/v1/chat/completions")


async def echo_auth_status(request: web.Request) -> web.StreamResponse:
    auth = request.headers.get("Authorization", "")
    return web.Response(status=401, text=f"bad credentials: {auth}")


async def echo_auth_event(request: web.Request) -> web.StreamResponse:
    auth = request.headers.get("Authorization", "")
    err = orjson.dumps({"error": {"message": f"rejected {auth}"}})
    return await _write_all(request, _chunk("a") + b"event: error\ndata: " + err + b"\n\n")


async def resp_ok(request: web.Request) -> web.StreamResponse:
    return await _write_all(request, _R_GOOD)


async def resp_truncated(request: web.Request) -> web.StreamResponse:
    # Deltas, then a clean close without response.completed.
    return await _write_all(request, _R_OPEN + _delta("a") + _delta("b"))


async def resp_error_event(request: web.Request) -> web.StreamResponse:
    err = {"type": "error", "code": "server_error", "message": "model overloaded"}
    return await _write_all(request, _R_OPEN + _delta("a") + _event(err))


async def resp_failed(request: web.Request) -> web.StreamResponse:
    failed = {
        "type": "response.failed",
        "response": {"id": "resp_h1", "status": "failed", "error": {"message": "KV cache OOM"}},
    }
    return await _write_all(request, _R_OPEN + _delta("a") + _event(failed))


async def resp_unknown_events(request: web.Request) -> web.StreamResponse:
    # Event types from a later API version, one without an event: line, and a comment.
    odd = _event({"type": "response.future_thing.delta", "delta": "not a token"})
    odd += b'data: {"type":"response.audio.delta","delta":"AAAA"}\n\n: keep-alive\n\n'
    return await _write_all(request, _R_OPEN + odd + _delta("a") + odd + _delta("b") + _R_DONE)


MODES: dict[str, Handler] = {
    "ok": ok,
    "invalid-json": invalid_json,
    "no-data-prefix": no_data_prefix,
    "no-done": no_done,
    "truncated": truncated,
    "huge-line": huge_line,
    "binary": binary,
    "wrong-type": wrong_type,
    "html-as-sse": html_as_sse,
    "empty-stream": empty_stream,
    "cut-mid-event": cut_mid_event,
    "unterminated-data": unterminated_data,
    "not-object": not_object,
    "error-event": error_event,
    "error-in-chunk": error_in_chunk,
    "rate-limited": rate_limited,
    "http-500": http_500,
    "http-503": http_503,
    "slowloris": slowloris,
    "reset": reset,
    "endless": endless,
    "stall": stall,
    "stall-first": stall_first,
    "double-done": double_done,
    "gzip": gzipped,
    "redirect": redirect,
    "echo-auth-status": echo_auth_status,
    "echo-auth-event": echo_auth_event,
    # The Responses API's event stream (served on /{mode}/v1/responses).
    "resp-ok": resp_ok,
    "resp-truncated": resp_truncated,
    "resp-error-event": resp_error_event,
    "resp-failed": resp_failed,
    "resp-unknown-events": resp_unknown_events,
    "keyed": ok,
    "metrics-html": ok,
    "metrics-binary": ok,
    "metrics-truncated": ok,
}


async def _dispatch(request: web.Request) -> web.StreamResponse:
    handler = MODES.get(request.match_info["mode"])
    if handler is None:
        raise web.HTTPNotFound()
    await request.read()
    return await handler(request)


METRICS_PAGE = (
    "# TYPE vllm:num_requests_running gauge\n"
    'vllm:num_requests_running{model_name="hostile-llm"} 1.0\n'
    "# TYPE vllm:num_requests_waiting gauge\n"
    'vllm:num_requests_waiting{model_name="hostile-llm"} 0.0\n'
)
METRICS_KEY = "hostile-metrics-key"
"""``/keyed/metrics`` answers only a request that carries this key, as a gated server does."""


# What ``/{mode}/metrics`` answers in the modes that break it: a login page, bytes that
# are not text, a page cut inside a sample. Every reader of a server's answer is fed
# such bodies (``/v1/models`` below, ``/tokenize`` after it).
METRICS_ANSWERS: dict[str, tuple[bytes, str]] = {
    "metrics-html": (b"<!DOCTYPE html><html><title>Sign in</title></html>", "text/html"),
    "metrics-binary": (bytes(range(256)) * 4, "application/octet-stream"),
    "metrics-truncated": (METRICS_PAGE.encode()[:70], "text/plain"),
}


async def _metrics(request: web.Request) -> web.StreamResponse:
    answer = METRICS_ANSWERS.get(request.match_info["mode"])
    if answer is not None:
        return web.Response(body=answer[0], content_type=answer[1])
    keyed = request.match_info["mode"] == "keyed"
    if keyed and request.headers.get("Authorization") != f"Bearer {METRICS_KEY}":
        return web.Response(status=401, text="no key")
    return web.Response(text=METRICS_PAGE, content_type="text/plain")


# What ``/{mode}/v1/models`` answers in the modes that break it (an auth proxy's login
# page, an empty or cut body, JSON of the wrong shape); every other mode lists one model.
MODELS_ANSWERS: dict[str, tuple[str, str]] = {
    "models-html": ("<!DOCTYPE html><html><title>Sign in</title></html>", "text/html"),
    "models-empty": ("", "application/json"),
    "models-truncated": ('{"object": "list", "data": [{"id": "hos', "application/json"),
    "models-list": ('["hostile-llm"]', "application/json"),
}


async def _models(request: web.Request) -> web.StreamResponse:
    answer = MODELS_ANSWERS.get(request.match_info["mode"])
    if answer is not None:
        body, content_type = answer
        return web.Response(text=body, content_type=content_type)
    return web.json_response({"object": "list", "data": [{"id": "hostile-llm"}]})


# What ``/{mode}/tokenize`` (and ``/detokenize``) answer in the modes that break them;
# every other mode counts a token a word, as a server's tokenizer would answer.
TOKENIZE_ANSWERS: dict[str, str] = {
    "tok-html": "<!DOCTYPE html><html><title>Sign in</title></html>",
    "tok-empty": "",
    "tok-truncated": '{"tokens": [1, 2',
    "tok-list": "[1, 2]",
    "tok-strings": '{"tokens": ["hello", "world"]}',
    "tok-objects": '{"tokens": [{"piece": "hello"}]}',
    "tok-none": '{"tokens": null}',
    "tok-404": "<html><body>404 Not Found</body></html>",
}


async def _tokenize(request: web.Request) -> web.StreamResponse:
    answer = TOKENIZE_ANSWERS.get(request.match_info["mode"])
    if answer is not None:
        html = answer.startswith("<")
        status = 404 if request.match_info["mode"] == "tok-404" else 200
        ctype = "text/html" if html else "application/json"
        return web.Response(text=answer, content_type=ctype, status=status)
    body = await request.json()
    return web.json_response({"tokens": list(range(len(str(body.get("content")).split())))})


# What ``/{mode}/health`` answers in the modes that break it. Readiness is the status
# alone (vLLM answers an empty 200, llama.cpp JSON), so the 200s below are all "ready";
# the rest are "not ready", and a wait that gives up names what came back.
HEALTH_ANSWERS: dict[str, tuple[int, str, str]] = {
    "health-html": (200, "<!DOCTYPE html><html><title>Sign in</title></html>", "text/html"),
    "health-empty": (200, "", "application/json"),
    "health-text": (200, "OK", "text/plain"),
    "health-loading": (
        503,
        '{"error": {"message": "Loading model", "code": 503}}',
        "application/json",
    ),
    "health-404": (404, "<html><body>404 Not Found</body></html>", "text/html"),
    "health-500": (500, "", "text/plain"),
}
HEALTH_BROKEN = ("health-truncated", "health-reset", "health-garbage", "health-stall")
"""Answers that are no whole HTTP answer: a body cut short after a 200 (ready: the
status came), a reset before any byte, bytes that are not HTTP, no answer at all."""
_HEALTH_SEEN = web.AppKey("health_seen", list[int])


async def _health(request: web.Request) -> web.StreamResponse:
    mode = request.match_info["mode"]
    answer = HEALTH_ANSWERS.get(mode)
    if answer is not None:
        status, body, content_type = answer
        return web.Response(status=status, text=body, content_type=content_type)
    if mode == "health-first-only":  # ready once: a restart then never gets ready
        seen = request.app[_HEALTH_SEEN]
        seen.append(1)
        if len(seen) > 1:
            return web.Response(status=503, text="Loading model")
    if mode == "health-truncated":
        resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        resp.content_length = 100
        await resp.prepare(request)
        await resp.write(b'{"status": "o')
        _abort(request)
        return resp
    if mode == "health-reset":
        _abort(request)
        return web.Response()
    if mode == "health-garbage":
        transport = request.transport
        assert transport is not None
        transport.write(b"\x00\xffSSH-2.0-OpenSSH\r\n\r\n")
        transport.close()
        return web.Response()
    if mode == "health-stall":
        await asyncio.sleep(30)
    return web.json_response({"status": "ok"})


def _abort(request: web.Request) -> None:
    """Close the connection with a TCP RST (SO_LINGER 0), not a FIN."""
    transport = request.transport
    assert transport is not None
    sock = transport.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class HostileServer:
    """The hostile app on two loopback ports (plain and TLS), in a background thread."""

    def __init__(self) -> None:
        self.ca = trustme.CA()
        self._cert = self.ca.issue_cert("127.0.0.1", "localhost")
        self.port = 0
        self.tls_port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None

    def url(self, mode: str, *, tls: bool = False) -> str:
        """The base URL that serves ``mode``."""
        if tls:
            return f"https://127.0.0.1:{self.tls_port}/{mode}"
        return f"http://127.0.0.1:{self.port}/{mode}"

    def ca_file(self, folder: Any) -> str:
        """Write the CA certificate into ``folder``; returns its path."""
        path = os.path.join(str(folder), "hostile-ca.pem")
        self.ca.cert_pem.write_to_path(path)
        return path

    def __enter__(self) -> HostileServer:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    async def _start(self) -> None:
        app = web.Application()
        app[_SEEN] = []
        app[_HEALTH_SEEN] = []
        app.router.add_get("/{mode}/health", _health)
        app.router.add_get("/{mode}/v1/models", _models)
        app.router.add_get("/{mode}/metrics", _metrics)
        app.router.add_post("/{mode}/tokenize", _tokenize)
        app.router.add_post("/{mode}/detokenize", _tokenize)
        app.router.add_post("/{mode}/v1/chat/completions", _dispatch)
        app.router.add_post("/{mode}/v1/responses", _dispatch)
        self._runner = web.AppRunner(app, handler_cancellation=True)
        await self._runner.setup()
        plain = web.TCPSite(self._runner, "127.0.0.1", 0)
        await plain.start()
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._cert.configure_cert(ctx)
        secure = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=ctx)
        await secure.start()
        self.port = _port(plain)
        self.tls_port = _port(secure)

    async def _stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def _port(site: web.TCPSite) -> int:
    server = site._server
    assert isinstance(server, asyncio.base_events.Server)
    return int(server.sockets[0].getsockname()[1])
