"""What a request came to: lower-level exceptions mapped to outcome classes, and records.

Failures of single requests are not raised: every exception a request can meet (aiohttp's,
the OS's, the protocol's) maps here to one of ``RequestRecord``'s error classes, and any
text the server sent passes through ``auth.redact`` so an echoed API key never reaches
the results.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import TypedDict

import aiohttp

from loadtest.errors import ProtocolError
from loadtest.model.json import JsonObject
from loadtest.model.prompt import Prompt
from loadtest.model.reasoning import ReasoningSplit
from loadtest.model.record import RequestRecord
from loadtest.protocol.openai import STEP_GAP_NS, ServerError, StreamReader
from loadtest.protocol.validate import ToolValidator
from loadtest.transport.auth import redact

__all__ = ["Outcomes", "SentFields", "classify", "describe", "retry_after_s"]

_perf = time.perf_counter_ns


class _Sent(TypedDict):
    index: int
    prompt_id: str
    source: str
    category: str
    warmup: bool
    intended_ns: int
    sent_ns: int
    prompt_chars: int


class SentFields(_Sent, total=False):
    """The record's fields known from the send (and the connection), before any answer."""

    written_ns: int
    arrival_clock: str
    cancel_ns: int | None


class _StreamFields(TypedDict):
    first_byte_ns: int | None
    client_lag_ns: int | None
    first_token_ns: int | None
    last_token_ns: int | None
    token_chunk_ns: tuple[int, ...]
    chunks: int
    token_steps: int
    step_tokens: tuple[int, ...]
    prompt_tokens: int | None
    finish_reason: str | None
    response_id: str | None
    server_timings: JsonObject | None
    reasoning: ReasoningSplit | None


class _Judged(TypedDict, total=False):
    tool_calls: int
    tool_call_valid: bool
    tool_call_correct: bool | None
    tool_call_ns: int | None
    output_sha256: str | None
    output_head: str


def describe(exc: BaseException) -> str:
    """``Type: message`` (or the type alone), as records show an exception."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def classify(exc: Exception) -> tuple[str, str]:
    """(error class, message) of an exception a request met; ``client`` if unforeseen."""
    # Order matters: aiohttp's connector errors are also OSErrors, TLS ones connector errors.
    if isinstance(exc, ProtocolError):
        return "protocol", str(exc)
    if isinstance(exc, ServerError):
        return "server_error", str(exc)
    if isinstance(exc, aiohttp.ServerTimeoutError | TimeoutError):
        return "timeout", describe(exc)
    if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        why = f"{describe(exc)}; trust its CA with --ca-bundle FILE, or pass --insecure"
        return "tls", why
    if isinstance(exc, aiohttp.ClientConnectorError):
        return "connect", describe(exc)
    if isinstance(
        exc,
        aiohttp.ServerDisconnectedError
        | aiohttp.ClientPayloadError
        | aiohttp.ClientOSError
        | ConnectionError,
    ):
        return "disconnected", describe(exc)
    if isinstance(exc, aiohttp.ClientResponseError):
        return "protocol", describe(exc)
    return "client", describe(exc)


def retry_after_s(value: str | None) -> float | None:
    """Retry-After in seconds (the HTTP-date form is rare from LLM servers: ignored)."""
    if value is None:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


STEP_TALLY = 16
"""Sizes of verify steps told apart; the last slot counts the steps of 16 or more."""


def step_tally(chunk_ns: Sequence[int], gap_ns: int = STEP_GAP_NS) -> tuple[int, ...]:
    """Verify steps by the token chunks they carried: slot ``i`` counts steps of
    ``i + 1`` chunks. The first step is the prefill's token, not a verify: left out.
    (One chunk a token, as llama.cpp streams; an engine that packs a step into one
    chunk shows every step as one token here.)

    A pause inside one step's burst longer than ``gap_ns`` (a busy client) would split
    it and hide accepted tokens, so a gap ends a step only past a quarter of the
    median gap between steps as well: bursts are sub-millisecond, steps milliseconds."""
    gaps = [b - a for a, b in itertools.pairwise(chunk_ns[1:])]
    between = sorted(g for g in gaps if g > gap_ns)
    cut = max(gap_ns, between[len(between) // 2] // 4) if between else gap_ns
    tally = [0] * STEP_TALLY
    size = 1 if len(chunk_ns) > 1 else 0
    for g in gaps:
        if g > cut:
            tally[min(size, STEP_TALLY) - 1] += 1
            size = 1
        else:
            size += 1
    if size:
        tally[min(size, STEP_TALLY) - 1] += 1
    while tally and not tally[-1]:
        tally.pop()
    return tuple(tally)


def _stream_fields(reader: StreamReader, first_byte: int | None) -> _StreamFields:
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
        "token_steps": reader.steps,
        "step_tokens": step_tally(chunk_ns) if reader.steps else (),
        "prompt_tokens": prompt_tokens if isinstance(prompt_tokens, int) else None,
        "finish_reason": reader.finish_reason,
        "response_id": reader.response_id,
        "server_timings": reader.timings,
        "reasoning": reader.split.result(chunk_ns, reader.usage, reader.output_tokens()[0]),
    }


class Outcomes:
    """Builds the record of each way a request can end, for one client."""

    def __init__(self, api_key: str | None, keep_outputs: bool) -> None:
        self._api_key = api_key
        self._keep_outputs = keep_outputs
        self._validator = ToolValidator()

    def finished(
        self, base: SentFields, reader: StreamReader, first_byte: int, prompt: Prompt
    ) -> RequestRecord:
        """The record of an answer read to its end (judged, if it called tools)."""
        end = _perf()
        tokens, estimated = reader.output_tokens()
        extra: _Judged = {}
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
        if self._keep_outputs:
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

    def http_error(
        self,
        base: SentFields,
        resp: aiohttp.ClientResponse,
        text: bytes,
        first_byte: int,
        reader: StreamReader,
    ) -> RequestRecord:
        """The record of an answer with a status of 300 or more."""
        status = resp.status
        detail = text[:300].decode("utf-8", "replace")
        retry_after = None
        if status < 400:
            cls = "redirect"
            where = resp.headers.get("Location", "nowhere")
            detail = f"redirected to {where}; point --endpoint at the final address"
        elif status == 429:
            cls = "rate_limited"
            retry_after = retry_after_s(resp.headers.get("Retry-After"))
        else:
            cls = "http_4xx" if status < 500 else "http_5xx"
        return RequestRecord(
            **base,
            **_stream_fields(reader, first_byte),
            end_ns=_perf(),
            outcome="failed",
            error_class=cls,
            error=redact(f"HTTP {status}: {detail}", self._api_key),
            status=status,
            retry_after_s=retry_after,
        )

    def failed(
        self,
        base: SentFields,
        reader: StreamReader,
        first_byte: int | None,
        outcome: str,
        error_class: str | None,
        error: str,
    ) -> RequestRecord:
        """The record of a request that ended early (failed or cancelled)."""
        tokens, estimated = reader.output_tokens()
        return RequestRecord(
            **base,
            **_stream_fields(reader, first_byte),
            end_ns=_perf(),
            outcome=outcome,
            error_class=error_class,
            error=redact(error, self._api_key),
            output_tokens=tokens,
            tokens_estimated=estimated,
        )
