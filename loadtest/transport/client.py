"""The only aiohttp client code: one request in, one ``RequestRecord`` out.

Timeouts: aiohttp's own ``sock_connect`` covers connecting; first-byte, between-chunk
and total timeouts are enforced by one watchdog task per client that sweeps the
in-flight requests a few times per timeout period. Re-arming a timer on every chunk
would cost a timer handle per chunk on the hot path; the sweep costs nothing per chunk
but an attribute store.

Whatever the server sends, ``send`` returns a record: redirects are not followed (they
would hide the endpoint actually measured), a body that is not an event stream is a
``protocol`` failure, events and bodies are size-bounded, and any text the server sends
back passes through ``auth.redact`` so an echoed API key never reaches the results.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from loadtest._compat.arrivals import arrival_stamps, stamping_connector
from loadtest._compat.eager_send import eager_request_class
from loadtest.config.scenario import TimeoutSpec
from loadtest.datasets import Prompt
from loadtest.errors import EndpointError, ProtocolError
from loadtest.model.record import RequestRecord
from loadtest.protocol.openai import ServerError, StreamReader
from loadtest.protocol.sse import DEFAULT_MAX_EVENT_BYTES, SSEParser
from loadtest.protocol.validate import ToolValidator
from loadtest.transport.auth import redact
from loadtest.transport.urls import api_root

__all__ = ["Client", "ClientConfig", "discover_model"]

_perf = time.perf_counter_ns

MAX_BODY_BYTES = 16 << 20
"""The largest non-streamed body read; a longer one fails as ``protocol``."""
_STREAM_TYPES = ("text/event-stream", "application/octet-stream")


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """How to reach the endpoint."""

    base_url: str
    api: str = "chat"
    stream: bool = True
    timeouts: TimeoutSpec = field(default_factory=TimeoutSpec)
    concurrency: int = 0
    """Connection pool size; 0 means unlimited."""
    keepalive: bool = True
    api_key: str | None = field(default=None, repr=False)
    ssl: ssl.SSLContext | bool = True
    """aiohttp's ``ssl=``: True verifies, a context trusts a private CA, False trusts all."""
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    keep_outputs: bool = False
    """Digest each answer (text and tool calls) into the record, for output equivalence."""

    @property
    def url(self) -> str:
        """The full URL requests are posted to."""
        return api_root(self.base_url) + (
            "/chat/completions" if self.api == "chat" else "/completions"
        )


class _Flight:
    __slots__ = (
        "cancel_after_tokens",
        "cancel_ns",
        "deadline_ns",
        "end_by_ns",
        "phase",
        "task",
        "timed_out",
    )

    def __init__(self, task: asyncio.Task[Any], deadline_ns: int, end_by_ns: int) -> None:
        self.task = task
        self.deadline_ns = deadline_ns
        self.end_by_ns = end_by_ns
        self.phase = "first byte"
        self.timed_out: str | None = None
        self.cancel_after_tokens: int | None = None
        self.cancel_ns: int | None = None


class _InjectedCancel(Exception):
    """Raised inside the read loop when a planned mid-stream cancellation is due."""


def _inject_cancel(flight: _Flight) -> None:
    flight.cancel_ns = _perf()
    flight.task.cancel()


class Client:
    """An async context manager holding one shared session and the timeout watchdog."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._session: aiohttp.ClientSession | None = None
        self._fresh: aiohttp.ClientSession | None = None
        self._flights: set[_Flight] = set()
        self._watchdog: asyncio.Task[None] | None = None
        self._validator = ToolValidator()
        self.stale_retries = 0
        """Requests resent once because a pooled keep-alive connection had gone stale."""
        t = config.timeouts
        self._first_byte_ns = int(t.first_byte_s * 1e9)
        self._between_ns = int(t.between_chunks_s * 1e9)
        self._total_ns = int(t.total_s * 1e9)
        headers = {"Content-Type": "application/json"}
        if config.api_key:
            headers["Authorization"] = f"Bearer {config.api_key}"
        self._headers = headers

    async def __aenter__(self) -> Client:
        cfg = self.config
        # Arrival times are stamped where aiohttp receives bytes (loadtest._compat.arrivals).
        connector = stamping_connector(
            limit=cfg.concurrency, limit_per_host=0, force_close=not cfg.keepalive, ssl=cfg.ssl
        )
        # auto_decompress costs nothing on identity streams (it checks one header) and
        # keeps a server that gzips its stream anyway measurable.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=cfg.timeouts.connect_s)
        # The request is written in the call that sends it (loadtest._compat.eager_send).
        eager = eager_request_class()
        self._session = aiohttp.ClientSession(
            connector=connector, timeout=timeout, request_class=eager
        )
        # Resends after a stale keep-alive connection must not pick another pooled one
        # (it may be stale too): they go through a pool that never keeps connections.
        self._fresh = aiohttp.ClientSession(
            connector=stamping_connector(limit=0, force_close=True, ssl=cfg.ssl),
            timeout=timeout,
            request_class=eager,
        )
        self._watchdog = asyncio.create_task(self._sweep(), name="loadtest-timeouts")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            await asyncio.gather(self._watchdog, return_exceptions=True)
        if self._session is not None:
            await self._session.close()
        if self._fresh is not None:
            await self._fresh.close()

    @property
    def in_flight(self) -> int:
        """Requests currently open."""
        return len(self._flights)

    async def _sweep(self) -> None:
        period = min(self._first_byte_ns, self._between_ns, self._total_ns) / 4e9
        period = min(max(period, 0.005), 0.25)
        while True:
            await asyncio.sleep(period)
            now = _perf()
            for f in list(self._flights):
                if f.timed_out is None:
                    if now > f.deadline_ns:
                        f.timed_out = f.phase
                    elif now > f.end_by_ns:
                        f.timed_out = "total"
                    else:
                        continue
                    f.task.cancel()

    async def send(
        self,
        *,
        index: int,
        prompt: Prompt,
        body: bytes,
        intended_ns: int,
        warmup: bool,
        cancel_after_tokens: int | None = None,
        cancel_after_ms: float | None = None,
    ) -> RequestRecord:
        """Send one request and account for it, whatever happens; never raises.

        Cancelling the calling task yields a record with outcome ``cancelled``. The
        ``cancel_after_*`` arguments cancel the request on purpose (a fault): the
        connection is closed mid-stream and the record carries ``cancel_ns``.
        """
        reader = StreamReader(self.config.keep_outputs)
        return await self._send(
            reader, index, prompt, body, intended_ns, warmup, cancel_after_tokens, cancel_after_ms
        )

    async def exchange(
        self, *, index: int, prompt: Prompt, body: bytes, intended_ns: int, warmup: bool
    ) -> tuple[RequestRecord, StreamReader]:
        """Like ``send``, and also the reader: the answer's text and tool calls (agents)."""
        reader = StreamReader(keep_text=True)
        rec = await self._send(reader, index, prompt, body, intended_ns, warmup, None, None)
        return rec, reader

    async def _send(
        self,
        reader: StreamReader,
        index: int,
        prompt: Prompt,
        body: bytes,
        intended_ns: int,
        warmup: bool,
        cancel_after_tokens: int | None,
        cancel_after_ms: float | None,
    ) -> RequestRecord:
        assert self._session is not None, "use Client as an async context manager"
        task = asyncio.current_task()
        assert task is not None
        sent = _perf()
        flight = _Flight(task, sent + self._first_byte_ns, sent + self._total_ns)
        self._flights.add(flight)
        flight.cancel_after_tokens = cancel_after_tokens
        timer = None
        if cancel_after_ms is not None:
            timer = asyncio.get_running_loop().call_later(
                cancel_after_ms / 1000, _inject_cancel, flight
            )
        base: dict[str, Any] = {
            "index": index,
            "prompt_id": prompt.id,
            "source": prompt.source,
            "category": prompt.category,
            "warmup": warmup,
            "intended_ns": intended_ns,
            "sent_ns": sent,
            "prompt_chars": prompt.chars,
        }
        first_byte: int | None = None
        try:
            async with await self._post(body) as resp:
                stamps = arrival_stamps(resp)
                first_byte = _perf() if stamps is None else stamps.rx_ns
                if stamps is not None and stamps.tx_ns >= sent:
                    base["written_ns"] = stamps.tx_ns
                base["arrival_clock"] = (
                    "reader" if stamps is None else "kernel" if stamps.kernel else "loop"
                )
                if resp.status >= 300:
                    text = await resp.content.read(2048)
                    return self._http_error(base, resp, text, first_byte, reader)
                if self.config.stream:
                    await self._read_stream(resp, reader, flight)
                else:
                    data = await _read_bounded(resp)
                    now = _perf()
                    at = now if stamps is None else stamps.rx_ns
                    reader.client_lag_ns = now - at
                    reader.on_body(data, at)
            return self._finish(base, reader, first_byte, prompt)
        except _InjectedCancel:
            return self._injected(base, reader, first_byte, flight)
        except asyncio.CancelledError:
            if flight.cancel_ns is not None:
                task.uncancel()
                return self._injected(base, reader, first_byte, flight)
            if flight.timed_out is None:
                return self._failed(base, reader, first_byte, "cancelled", None, "cancelled")
            task.uncancel()
            return self._failed(
                base,
                reader,
                first_byte,
                "failed",
                "timeout",
                f"no data within the {flight.timed_out} timeout",
            )
        except ProtocolError as exc:
            return self._failed(base, reader, first_byte, "failed", "protocol", str(exc))
        except ServerError as exc:
            return self._failed(base, reader, first_byte, "failed", "server_error", str(exc))
        except (aiohttp.ServerTimeoutError, TimeoutError) as exc:
            return self._failed(base, reader, first_byte, "failed", "timeout", _msg(exc))
        except (aiohttp.ClientConnectorCertificateError, aiohttp.ClientSSLError) as exc:
            why = f"{_msg(exc)}; trust its CA with --ca-bundle FILE, or pass --insecure"
            return self._failed(base, reader, first_byte, "failed", "tls", why)
        except aiohttp.ClientConnectorError as exc:
            return self._failed(base, reader, first_byte, "failed", "connect", _msg(exc))
        except (
            aiohttp.ServerDisconnectedError,
            aiohttp.ClientPayloadError,
            aiohttp.ClientOSError,
            ConnectionError,
        ) as exc:
            return self._failed(base, reader, first_byte, "failed", "disconnected", _msg(exc))
        except aiohttp.ClientResponseError as exc:
            return self._failed(base, reader, first_byte, "failed", "protocol", _msg(exc))
        except Exception as exc:
            return self._failed(base, reader, first_byte, "failed", "client", _msg(exc))
        finally:
            self._flights.discard(flight)
            if timer is not None:
                timer.cancel()

    async def _post(self, body: bytes) -> aiohttp.ClientResponse:
        """POST, retrying once on a fresh connection if a pooled one was stale.

        A server may close an idle keep-alive connection just as the client reuses it
        (llama.cpp's server does so between streamed responses); the request then fails
        before the server read it. Browsers and urllib3 retry that case once; so do we,
        and only when the failure came before any response byte.
        """
        assert self._session is not None
        try:
            return await self._session.post(
                self.config.url, data=body, headers=self._headers, allow_redirects=False
            )
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            if isinstance(exc, aiohttp.ClientConnectorError):
                raise  # could not connect at all: not a stale connection
            self.stale_retries += 1
            assert self._fresh is not None
            return await self._fresh.post(
                self.config.url, data=body, headers=self._headers, allow_redirects=False
            )

    def _injected(
        self, base: dict[str, Any], reader: StreamReader, first_byte: int | None, flight: _Flight
    ) -> RequestRecord:
        base = base | {"cancel_ns": flight.cancel_ns}
        n = len(reader.token_chunk_ns)
        return self._failed(
            base, reader, first_byte, "cancelled", None, f"cancelled on purpose after {n} tokens"
        )

    async def _read_stream(
        self, resp: aiohttp.ClientResponse, reader: StreamReader, flight: _Flight
    ) -> None:
        ctype = resp.content_type
        if ctype not in _STREAM_TYPES:
            await self._not_a_stream(resp, ctype)
        parser = SSEParser(self.config.max_event_bytes)
        between = self._between_ns
        feed = parser.feed
        on_event = reader.on_event
        stamps = arrival_stamps(resp)
        reader.client_lag_ns = lag = 0
        async for data in resp.content.iter_any():
            now = _perf()
            at = now if stamps is None else stamps.rx_ns
            if now - at > lag:
                reader.client_lag_ns = lag = now - at
            # The first-byte timeout runs until the first *data*, not the headers: many
            # servers send headers at once and the first chunk only after prefill.
            flight.deadline_ns = now + between
            flight.phase = "between chunks"
            for event in feed(data):
                on_event(event, at)
            stop_at = flight.cancel_after_tokens
            if stop_at is not None and len(reader.token_chunk_ns) >= stop_at:
                flight.cancel_ns = _perf()
                resp.close()  # drop the connection, as a user closing the tab would
                raise _InjectedCancel
        if not reader.done and not reader.chunks and (parser.pending or parser.lines):
            raise ProtocolError(
                f"the stream had {parser.lines} lines but no `data:` events; is it SSE?"
            )
        if not reader.done and (parser.pending or reader.finish_reason is None):
            raise aiohttp.ServerDisconnectedError("stream ended before [DONE]")

    async def _not_a_stream(self, resp: aiohttp.ClientResponse, ctype: str) -> None:
        """Raise the right error for a 2xx answer to ``stream: true`` that is no stream."""
        if ctype == "application/json":
            reader = StreamReader()
            reader.on_body(await _read_bounded(resp), _perf())  # an error object raises here
            raise ProtocolError(
                "the server answered stream=true with one JSON body; does it support streaming?"
            )
        raise ProtocolError(f"expected text/event-stream, got content type {ctype!r}")

    def _finish(
        self, base: dict[str, Any], reader: StreamReader, first_byte: int, prompt: Prompt
    ) -> RequestRecord:
        end = _perf()
        tokens, estimated = reader.output_tokens()
        extra: dict[str, Any] = {}
        outcome, error_class, error = "ok", None, None
        calls = reader.tool_calls
        if calls and prompt.tools:
            verdict = self._validator.judge(
                calls, prompt.tools, prompt.expected_calls, prompt.name_map
            )
            extra = {
                "tool_calls": verdict.calls,
                "tool_call_valid": verdict.valid,
                "tool_call_correct": verdict.correct,
                "tool_call_ns": verdict.first_valid_ns,
            }
            if not verdict.valid:
                outcome, error_class, error = "failed", "invalid_output", verdict.problem
        elif calls:
            extra = {"tool_calls": len(calls)}
        if self.config.keep_outputs:
            extra["output_sha256"] = reader.output_digest()
            extra["output_head"] = (reader.text or "")[:200]
        return RequestRecord(
            **base,
            **_stream_fields(reader, first_byte),
            **extra,
            end_ns=end,
            outcome=outcome,
            error_class=error_class,
            error=error,
            status=200,
            output_tokens=tokens,
            tokens_estimated=estimated,
        )

    def _http_error(
        self,
        base: dict[str, Any],
        resp: aiohttp.ClientResponse,
        text: bytes,
        first_byte: int,
        reader: StreamReader,
    ) -> RequestRecord:
        status = resp.status
        detail = text[:300].decode("utf-8", "replace")
        retry_after = None
        if status < 400:
            cls = "redirect"
            where = resp.headers.get("Location", "nowhere")
            detail = f"redirected to {where}; point --endpoint at the final address"
        elif status == 429:
            cls = "rate_limited"
            retry_after = _retry_after_s(resp.headers.get("Retry-After"))
        else:
            cls = "http_4xx" if status < 500 else "http_5xx"
        return RequestRecord(
            **base,
            **_stream_fields(reader, first_byte),
            end_ns=_perf(),
            outcome="failed",
            error_class=cls,
            error=redact(f"HTTP {status}: {detail}", self.config.api_key),
            status=status,
            retry_after_s=retry_after,
        )

    def _failed(
        self,
        base: dict[str, Any],
        reader: StreamReader,
        first_byte: int | None,
        outcome: str,
        error_class: str | None,
        error: str,
    ) -> RequestRecord:
        tokens, estimated = reader.output_tokens()
        return RequestRecord(
            **base,
            **_stream_fields(reader, first_byte),
            end_ns=_perf(),
            outcome=outcome,
            error_class=error_class,
            error=redact(error, self.config.api_key),
            output_tokens=tokens,
            tokens_estimated=estimated,
        )


async def _read_bounded(resp: aiohttp.ClientResponse) -> bytes:
    body = await resp.content.read(MAX_BODY_BYTES + 1)
    while len(body) <= MAX_BODY_BYTES and not resp.content.at_eof():
        more = await resp.content.read(MAX_BODY_BYTES + 1 - len(body))
        if not more:
            break
        body += more
    if len(body) > MAX_BODY_BYTES:
        raise ProtocolError(f"response body exceeds {MAX_BODY_BYTES} bytes")
    return body


def _retry_after_s(value: str | None) -> float | None:
    """Retry-After in seconds (the HTTP-date form is rare from LLM servers: ignored)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _stream_fields(reader: StreamReader, first_byte: int | None) -> dict[str, Any]:
    chunk_ns: Sequence[int] = reader.token_chunk_ns
    usage = reader.usage or {}
    prompt_tokens = usage.get("prompt_tokens")
    return {
        "first_byte_ns": first_byte,
        "client_lag_ns": reader.client_lag_ns,
        "first_token_ns": chunk_ns[0] if chunk_ns else None,
        "last_token_ns": chunk_ns[-1] if chunk_ns else None,
        "token_chunk_ns": tuple(chunk_ns),
        "chunks": reader.chunks,
        "prompt_tokens": prompt_tokens if isinstance(prompt_tokens, int) else None,
        "finish_reason": reader.finish_reason,
        "response_id": reader.response_id,
        "server_timings": reader.timings,
    }


def _msg(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def discover_model(
    base_url: str,
    api_key: str | None = None,
    timeout_s: float = 10.0,
    tls: ssl.SSLContext | bool = True,
) -> str:
    """The first model id ``GET /v1/models`` lists; ``EndpointError`` when unreachable."""
    url = api_root(base_url) + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            session.get(url, headers=headers, ssl=tls, allow_redirects=False) as resp,
        ):
            if resp.status != 200:
                raise EndpointError(
                    f"{url} answered HTTP {resp.status}; name the model with --model"
                )
            data = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise EndpointError(redact(f"cannot reach {url}: {_msg(exc)}", api_key)) from exc
    models = data.get("data") if isinstance(data, dict) else None
    if not models or not isinstance(models[0], dict) or "id" not in models[0]:
        raise EndpointError(f"{url} lists no model; name the model with --model")
    return str(models[0]["id"])
