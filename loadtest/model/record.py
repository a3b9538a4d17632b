"""The frozen record of one request, the unit everything downstream consumes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadtest.model.reasoning import ReasoningSplit

__all__ = ["CORRECTED", "ERROR_CLASSES", "METRICS", "OUTCOMES", "RequestRecord", "line_ns"]

METRICS = (
    "ttft_ms",
    "ttfa_ms",
    "itl_ms",
    "tpot_ms",
    "e2e_ms",
    "tool_call_ms",
    "dispatch_lag_ms",
    "client_lag_ms",
)
"""The latencies measured from each request's record, in ms (see README, "What is measured")."""
CORRECTED = ("ttft_ms", "ttfa_ms", "e2e_ms", "tool_call_ms")
"""Metrics measured from the send time, which therefore have a ``*_corrected`` twin."""

OUTCOMES = ("ok", "failed", "cancelled")
ERROR_CLASSES = (
    "connect",  # could not open a connection
    "timeout",  # connect, first-byte, between-chunk or total timeout
    "http_4xx",
    "http_5xx",
    "rate_limited",  # HTTP 429
    "disconnected",  # the server closed or reset the stream before it ended
    "protocol",  # bytes that are not SSE / the OpenAI chunk format
    "server_error",  # an error the server reported inside the stream
    "invalid_output",  # a tool call that is not JSON, not offered, or breaks its schema
    "redirect",  # a 3xx answer: loadtest does not follow redirects
    "tls",  # the certificate was not trusted (see --ca-bundle, --insecure)
    "client",  # anything else; a bug in loadtest if it ever shows
)
ENGINE_CANCELS = ("grace_expired", "aborted", "warmup_unneeded", "run_cancelled")
"""Why the engine itself cancelled a request (the error class of such a record)."""


@dataclass(frozen=True, slots=True)
class RequestRecord:
    """What happened to one request. Times are ``perf_counter_ns`` values.

    ``intended_ns`` is when the schedule wanted the request sent; ``sent_ns`` when it
    actually was. Latency from ``sent_ns`` is *raw*; from ``intended_ns`` it is
    corrected for coordinated omission.
    """

    index: int
    prompt_id: str
    source: str
    category: str
    warmup: bool
    intended_ns: int
    sent_ns: int
    end_ns: int
    outcome: str
    error_class: str | None = None
    error: str | None = None
    status: int | None = None
    first_byte_ns: int | None = None
    first_token_ns: int | None = None
    last_token_ns: int | None = None
    token_chunk_ns: tuple[int, ...] = ()
    chunks: int = 0
    token_steps: int = 0
    """Decode steps the token chunks arrived in (``StreamReader.steps``)."""
    step_tokens: tuple[int, ...] = ()
    """Verify steps by the chunks they carried (slot i: steps of i + 1), the first step
    (the prefill's token) left out: acceptance by position is derived from it."""
    output_tokens: int = 0
    tokens_estimated: bool = False
    prompt_tokens: int | None = None
    finish_reason: str | None = None
    response_id: str | None = None
    tool_calls: int = 0
    tool_call_valid: bool | None = None
    tool_call_correct: bool | None = None
    tool_call_ns: int | None = None
    server_timings: dict[str, Any] | None = None
    prompt_chars: int = 0
    cancel_ns: int | None = None
    """When loadtest cancelled the request on purpose (a fault), else None."""
    retry_after_s: float | None = None
    """The ``Retry-After`` of a 429 answer, in seconds."""
    output_sha256: str | None = None
    """Digest of the answer's text and tool calls (only when outputs are recorded)."""
    output_head: str | None = None
    """The answer's first 200 characters (only when outputs are recorded)."""
    written_ns: int | None = None
    """When the request's last bytes were handed to the kernel (after connecting): the
    send's own cost is ``written_ns - sent_ns`` (None where it cannot be stamped)."""
    client_lag_ns: int | None = None
    """Longest loadtest took to read body bytes after they reached the process: token
    times are arrival times, so this is not in them, but a large value says the
    driver itself was the bottleneck (``loadtest._compat.arrivals``)."""
    arrival_clock: str | None = None
    """What stamped the response's arrivals: ``kernel`` (the socket's receive stamps,
    immune to the driver's delays), ``loop`` (when the event loop received the bytes)
    or ``reader`` (when loadtest read them); None before any response."""
    reasoning: ReasoningSplit | None = None
    """The reasoning before the answer (None: none seen, the split ``none``)."""

    @property
    def ttft_ns(self) -> int | None:
        """Time to first token from the actual send."""
        return None if self.first_token_ns is None else self.first_token_ns - self.sent_ns

    @property
    def first_answer_ns(self) -> int | None:
        """The first answer token after any reasoning (the first token without any)."""
        return self.first_token_ns if self.reasoning is None else self.reasoning.answer_ns

    @property
    def ttfa_ns(self) -> int | None:
        """Time to the first answer token from the actual send (TTFT without reasoning)."""
        first = self.first_answer_ns
        return None if first is None else first - self.sent_ns

    @property
    def reasoning_tokens(self) -> int:
        """Tokens of the reasoning (0 without any)."""
        return 0 if self.reasoning is None else self.reasoning.tokens

    @property
    def tpot_ns(self) -> float | None:
        """Time per output token after the first (decode speed), None below 2 tokens.

        None for an answer with tool calls: a server's tool parser (vLLM's, llama.cpp's)
        holds the tokens back until a piece of the call parses, so the first delta comes
        late and the span after it covers fewer tokens than ``output_tokens - 1``: TPOT
        would be deflated, far below vLLM's own (docs/vllm.md). The engine's own
        inter-token histogram (the summary's server block) is the figure there.
        """
        if self.first_token_ns is None or self.last_token_ns is None or self.output_tokens < 2:
            return None
        if self.tool_calls:
            return None
        return (self.last_token_ns - self.first_token_ns) / (self.output_tokens - 1)

    @property
    def tokens_per_step(self) -> float | None:
        """Tokens per decode step after the first token, from the stream's bursts.

        The first token comes from the prefill, in a step of its own that no draft is
        verified in: counting it made 3 accepted per step read 2.56 on vLLM. So this is
        (output - 1) / (steps - 1), None below two steps, and None for an answer with
        tool calls (a parser's buffering makes bursts that are not steps: 2.24 tokens a
        step was read with no speculation at all).
        """
        if self.token_steps < 2 or self.output_tokens < 2 or self.tool_calls:
            return None
        return (self.output_tokens - 1) / (self.token_steps - 1)

    def to_json(self, t0_ns: int) -> dict[str, Any]:
        """A JSON-ready dict with times in ms relative to ``t0_ns`` (the run's start)."""

        def rel(ns: int | None) -> float | None:
            return None if ns is None else round((ns - t0_ns) / 1e6, 4)

        def dur(ns: float | None) -> float | None:
            return None if ns is None else round(ns / 1e6, 4)

        return {
            "index": self.index,
            "prompt_id": self.prompt_id,
            "source": self.source,
            "category": self.category,
            "warmup": self.warmup,
            "outcome": self.outcome,
            "error_class": self.error_class,
            "error": self.error,
            "status": self.status,
            "intended_ms": rel(self.intended_ns),
            "sent_ms": rel(self.sent_ns),
            "first_token_ms": rel(self.first_token_ns),
            "end_ms": rel(self.end_ns),
            "dispatch_lag_ms": dur(self.sent_ns - self.intended_ns),
            "client_lag_ms": dur(self.client_lag_ns),
            "arrival_clock": self.arrival_clock,
            "write_ms": dur(None if self.written_ns is None else self.written_ns - self.sent_ns),
            "ttft_ms": dur(self.ttft_ns),
            "ttfa_ms": dur(self.ttfa_ns),
            "e2e_ms": dur(self.end_ns - self.sent_ns),
            "tpot_ms": dur(self.tpot_ns),
            "chunks": self.chunks,
            "token_chunks": len(self.token_chunk_ns),
            "token_steps": self.token_steps,
            "step_tokens": list(self.step_tokens),
            "output_tokens": self.output_tokens,
            "reasoning_split": "none" if self.reasoning is None else self.reasoning.way,
            "reasoning_tokens": self.reasoning_tokens,
            "answer_tokens": max(0, self.output_tokens - self.reasoning_tokens),
            **(
                {}
                if self.reasoning is None
                else self.reasoning.to_json(self.sent_ns, self.last_token_ns)
            ),
            "tokens_estimated": self.tokens_estimated,
            "prompt_tokens": self.prompt_tokens,
            "prompt_chars": self.prompt_chars,
            "finish_reason": self.finish_reason,
            "response_id": self.response_id,
            "tool_calls": self.tool_calls,
            "tool_call_valid": self.tool_call_valid,
            "tool_call_correct": self.tool_call_correct,
            "tool_call_ms": dur(
                None if self.tool_call_ns is None else self.tool_call_ns - self.sent_ns
            ),
            "server_timings": self.server_timings,
            "retry_after_s": self.retry_after_s,
            **(
                {"output_sha256": self.output_sha256, "output_head": self.output_head}
                if self.output_sha256 is not None
                else {}
            ),
            "injected_cancel": self.cancel_ns is not None,
            "cancel_close_ms": dur(
                None if self.cancel_ns is None else self.end_ns - self.cancel_ns
            ),
        }

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> RequestRecord:
        """The record a ``to_json`` line was written from, its times relative to the run's
        start (``t0_ns`` = 0), to the line's 0.1 µs rounding.

        Each duration is rebuilt from its own field (``ttft_ms``, ``e2e_ms``...), not from
        a difference of two rounded times, so a metric recorded again from the record is
        the line's value. Not in a line, so absent here: the first byte's time, and the
        chunk times unless the run was ``--record-chunks``. ``KeyError``/``TypeError``
        when the line is not one of a request.
        """
        sent = _ns(row["sent_ms"])
        first = None if row.get("ttft_ms") is None else sent + _ns(row["ttft_ms"])
        end = sent + _ns(row["e2e_ms"])
        tokens = int(row.get("output_tokens") or 0)
        tpot = row.get("tpot_ms")
        close = row.get("cancel_close_ms")
        return cls(
            index=int(row["index"]),
            prompt_id=str(row.get("prompt_id")),
            source=str(row.get("source")),
            category=str(row.get("category")),
            warmup=bool(row.get("warmup")),
            intended_ns=sent - _ns(row.get("dispatch_lag_ms") or 0.0),
            sent_ns=sent,
            end_ns=end,
            outcome=str(row["outcome"]),
            error_class=row.get("error_class"),
            error=row.get("error"),
            status=row.get("status"),
            first_token_ns=first,
            last_token_ns=None
            if first is None or tpot is None
            else first + _ns(tpot) * (tokens - 1),
            token_chunk_ns=tuple(sent + _ns(ms) for ms in row.get("token_chunk_ms") or ()),
            chunks=int(row.get("chunks") or 0),
            token_steps=int(row.get("token_steps") or 0),
            step_tokens=tuple(int(n) for n in row.get("step_tokens") or ()),
            output_tokens=tokens,
            tokens_estimated=bool(row.get("tokens_estimated")),
            prompt_tokens=row.get("prompt_tokens"),
            finish_reason=row.get("finish_reason"),
            response_id=row.get("response_id"),
            tool_calls=int(row.get("tool_calls") or 0),
            tool_call_valid=row.get("tool_call_valid"),
            tool_call_correct=row.get("tool_call_correct"),
            tool_call_ns=None
            if row.get("tool_call_ms") is None
            else sent + _ns(row["tool_call_ms"]),
            server_timings=row.get("server_timings"),
            prompt_chars=int(row.get("prompt_chars") or 0),
            cancel_ns=end - _ns(close)
            if row.get("injected_cancel") and close is not None
            else None,
            retry_after_s=row.get("retry_after_s"),
            output_sha256=row.get("output_sha256"),
            output_head=row.get("output_head"),
            written_ns=None if row.get("write_ms") is None else sent + _ns(row["write_ms"]),
            client_lag_ns=None if row.get("client_lag_ms") is None else _ns(row["client_lag_ms"]),
            arrival_clock=row.get("arrival_clock"),
            reasoning=ReasoningSplit.from_json(row, sent),
        )


def _ns(ms: float) -> int:
    # Lines hold ms to 4 decimals: whole multiples of 100 ns once rounded back.
    return round(ms * 1e6)


def line_ns(ns: int) -> int:
    """A duration as a requests.jsonl line gives it back (to 100 ns).

    A figure whose *count* hangs on a duration (the closed loop's coordinated-omission
    correction: how many samples a value stands for) is computed from this, so that a
    summary rebuilt from the lines counts what the run counted.
    """
    return _ns(round(ns / 1e6, 4))
