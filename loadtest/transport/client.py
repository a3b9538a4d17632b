"""The only aiohttp client code: one request in, one ``RequestRecord`` out.

Timeouts: aiohttp's own ``sock_connect`` covers connecting; first-byte, between-chunk
and total timeouts are enforced by one watchdog task per client that sweeps the
in-flight requests a few times per timeout period. Re-arming a timer on every chunk
would cost a timer handle per chunk on the hot path; the sweep costs nothing per chunk
but an attribute store.

Whatever the server sends, ``send`` returns a record: redirects are not followed (they
would hide the endpoint actually measured), a body that is not an event stream is a
``protocol`` failure, events and bodies are size-bounded (``transport.reading``), and
every failure maps to an error class (``transport.outcome``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time

import aiohttp

from loadtest._compat.arrivals import arrival_stamps, stamping_connector
from loadtest._compat.eager_send import eager_request_class
from loadtest._compat.open_files import raise_open_files, short_of
from loadtest._compat.selfcheck import fallbacks
from loadtest.model.prompt import Prompt
from loadtest.model.record import RequestRecord
from loadtest.protocol.openai import StreamReader
from loadtest.protocol.responses import new_reader
from loadtest.transport.config import ClientConfig
from loadtest.transport.discover import discover_model
from loadtest.transport.flight import Flight, InjectedCancel, inject_cancel
from loadtest.transport.outcome import Outcomes, SentFields, classify
from loadtest.transport.reading import read_bounded, read_stream

__all__ = ["Client", "ClientConfig", "discover_model"]

_perf = time.perf_counter_ns
log = logging.getLogger(__name__)


class Client:
    """An async context manager holding one shared session and the timeout watchdog."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._sessions: list[aiohttp.ClientSession] = []
        self._fresh: list[aiohttp.ClientSession] = []
        self._turn = 0
        # The pool a context (a task's) was given: a closed-loop session keeps its own.
        self._pool_of: contextvars.ContextVar[int | None] = contextvars.ContextVar(
            f"loadtest-pool-{id(self)}", default=None
        )
        self._flights: set[Flight] = set()
        self._watchdog: asyncio.Task[None] | None = None
        self._out = Outcomes(config.api_key, config.keep_outputs)
        self.fallbacks: tuple[str, ...] = ()
        """Private-API hooks that failed their self-check and fell back (names)."""
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
        # Every private hook checks itself once per process; a failed one logs and
        # falls back (loadtest._compat.checks), and the run can record which.
        self.fallbacks = fallbacks()
        # Each open stream is a socket: the soft descriptor limit (often 1,024) goes up
        # to the hard one, and a pool that cannot fit under it says so before it fails.
        raise_open_files()
        short = short_of(cfg.concurrency) if cfg.concurrency else None
        if short is not None:
            log.warning("%s", short)
        # auto_decompress costs nothing on identity streams (it checks one header) and
        # keeps a server that gzips its stream anyway measurable.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=cfg.timeouts.connect_s)
        # The request is written in the call that sends it (loadtest._compat.eager_send).
        eager = eager_request_class()
        # One pool per source address (aiohttp binds a connector's connections to one
        # local address), given out in turn (``_pool``), so the ports of each address
        # carry 1/n of the connections (loadtest.transport.sources).
        for local in cfg.source_addresses or (None,):
            bind = None if local is None else (local, 0)
            # Arrival times are stamped where aiohttp receives bytes (loadtest._compat.arrivals).
            connector = stamping_connector(
                limit=cfg.concurrency,
                limit_per_host=0,
                force_close=not cfg.keepalive,
                ssl=cfg.ssl,
                local_addr=bind,
            )
            self._sessions.append(
                aiohttp.ClientSession(connector=connector, timeout=timeout, request_class=eager)
            )
            # Resends after a stale keep-alive connection must not pick another pooled one
            # (it may be stale too): they go through a pool that never keeps connections.
            fresh = stamping_connector(limit=0, force_close=True, ssl=cfg.ssl, local_addr=bind)
            self._fresh.append(
                aiohttp.ClientSession(connector=fresh, timeout=timeout, request_class=eager)
            )
        self._watchdog = asyncio.create_task(self._sweep(), name="loadtest-timeouts")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            await asyncio.gather(self._watchdog, return_exceptions=True)
        for session in (*self._sessions, *self._fresh):
            await session.close()

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
        # The reader is chosen by api once per request, never per chunk.
        reader = new_reader(self.config.api, self.config.keep_outputs)
        return await self._send(
            reader, index, prompt, body, intended_ns, warmup, cancel_after_tokens, cancel_after_ms
        )

    async def exchange(
        self, *, index: int, prompt: Prompt, body: bytes, intended_ns: int, warmup: bool
    ) -> tuple[RequestRecord, StreamReader]:
        """Like ``send``, and also the reader: the answer's text and tool calls (agents)."""
        reader = new_reader(self.config.api, keep_text=True)
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
        assert self._sessions, "use Client as an async context manager"
        task = asyncio.current_task()
        assert task is not None
        sent = _perf()
        flight = Flight(task, sent + self._first_byte_ns, sent + self._total_ns)
        self._flights.add(flight)
        flight.cancel_after_tokens = cancel_after_tokens
        timer = None
        if cancel_after_ms is not None:
            timer = asyncio.get_running_loop().call_later(
                cancel_after_ms / 1000, inject_cancel, flight
            )
        base: SentFields = {
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
                use = 0 if stamps is None else stamps.uses
                if resp.status >= 300:
                    text = await resp.content.read(2048)
                    return self._out.http_error(base, resp, text, first_byte, reader)
                if self.config.stream:
                    cfg = self.config
                    await read_stream(resp, reader, flight, self._between_ns, cfg.max_event_bytes)
                else:
                    data = await read_bounded(resp)
                    now = _perf()
                    at = now if stamps is None else stamps.rx_ns
                    reader.client_lag_ns = now - at
                    reader.on_body(data, at)
                if stamps is not None:
                    # The server's keep-alive terms: no request into a connection it dropped.
                    stamps.keep_alive(resp.headers.get("Keep-Alive"), use)
            return self._out.finished(base, reader, first_byte, prompt)
        except InjectedCancel:
            return self._injected(base, reader, first_byte, flight)
        except asyncio.CancelledError:
            if flight.cancel_ns is not None:
                task.uncancel()
                return self._injected(base, reader, first_byte, flight)
            if flight.timed_out is None:
                return self._out.failed(base, reader, first_byte, "cancelled", None, "cancelled")
            task.uncancel()
            return self._out.failed(
                base,
                reader,
                first_byte,
                "failed",
                "timeout",
                f"no data within the {flight.timed_out} timeout",
            )
        except Exception as exc:
            error_class, why = classify(exc)
            return self._out.failed(base, reader, first_byte, "failed", error_class, why)
        finally:
            self._flights.discard(flight)
            if timer is not None:
                timer.cancel()

    def _pool(self) -> int:
        """The source address (pool) of this request: the calling context's (a task's),
        given in turn.

        A closed-loop session is one task: it keeps its address, so its next request
        finds its own kept-alive connection in that pool, and the sessions are spread
        evenly over the addresses. An open loop's requests each run in a context of
        their own, so they take the addresses in turn.
        """
        n = len(self._sessions)
        if n == 1:
            return 0
        turn = self._pool_of.get()
        if turn is None:
            turn = self._turn
            self._turn = (turn + 1) % n
            self._pool_of.set(turn)
        return turn

    async def _post(self, body: bytes) -> aiohttp.ClientResponse:
        """POST, retrying once on a fresh connection if a pooled one was stale.

        A server may close an idle keep-alive connection just as the client reuses it;
        the request then fails before the server read it. Browsers and urllib3 retry
        that case once; so do we, and only when the failure came before any response
        byte. A server that closes after every response (llama.cpp, after each stream)
        costs at most one such resend: the pool learns it (``PoolHints``) and lends none
        of its connections again.
        """
        turn = self._pool()
        try:
            return await self._sessions[turn].post(
                self.config.url, data=body, headers=self._headers, allow_redirects=False
            )
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as exc:
            if isinstance(exc, aiohttp.ClientConnectorError):
                raise  # could not connect at all: not a stale connection
            self.stale_retries += 1
            return await self._fresh[turn].post(
                self.config.url, data=body, headers=self._headers, allow_redirects=False
            )

    def _injected(
        self, base: SentFields, reader: StreamReader, first_byte: int | None, flight: Flight
    ) -> RequestRecord:
        base = base.copy()
        base["cancel_ns"] = flight.cancel_ns
        n = len(reader.token_chunk_ns)
        return self._out.failed(
            base, reader, first_byte, "cancelled", None, f"cancelled on purpose after {n} tokens"
        )
