"""How one answer divided into reasoning and answer, as the client saw it.

A reasoning model streams a think segment before its answer: in reasoning fields
(``field``: ``reasoning_content``, ``reasoning``, the Responses API's reasoning events)
or as raw ``<think>...</think>`` in the content (``think-tags``: a server without a
reasoning parser). The record keeps the split's times and counts
(``RequestRecord.reasoning``; None where no reasoning was seen: the split ``none``,
whose first answer token is the first token). The figures are defined in
docs/metrics.md ("Reasoning").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from loadtest.model.stats import MetricStats

__all__ = ["SPLIT_WAYS", "ReasoningBlock", "ReasoningSplit"]

SPLIT_WAYS = ("field", "think-tags", "none")
"""How a request's reasoning was told from its answer (``none``: no reasoning seen)."""


def _ms(ns: float | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 4)


@dataclass(frozen=True, slots=True)
class ReasoningSplit:
    """The reasoning part of one answer. Times are ``perf_counter_ns`` values."""

    way: str
    """``field`` or ``think-tags`` (``SPLIT_WAYS``)."""
    first_ns: int
    """Arrival of the first chunk that carried reasoning (its opening tag included)."""
    last_ns: int
    """Arrival of the last chunk that carried reasoning (its closing tag included)."""
    chunks: int
    """Token chunks that carried reasoning."""
    answer_ns: int | None
    """Arrival of the first answer token after the reasoning: content that is not
    whitespace alone, or a tool call (None: no answer came)."""
    answer_chunks: int
    """Token chunks from the first answer chunk on."""
    tokens: int
    """Reasoning tokens: usage's ``reasoning_tokens`` where sent, else ``counted``."""
    counted: int
    """Reasoning tokens as the stream showed them: the completion's tokens times the
    reasoning's share of the token chunks (the chunks themselves where no usage came)."""
    reported: int | None
    """``usage.completion_tokens_details.reasoning_tokens`` (Responses API:
    ``output_tokens_details``), None where the server sent none."""
    disagree: bool
    """The reported count cannot be right: fewer than the chunks that carried reasoning
    alone (every chunk carries a token), or more than the tokens the chunks of the
    answer alone leave."""

    @property
    def reasoning_ns(self) -> int:
        """How long the reasoning held the answer back: from its first chunk to the
        first answer token (to its own last chunk where no answer came)."""
        return (self.answer_ns if self.answer_ns is not None else self.last_ns) - self.first_ns

    def to_json(self, sent_ns: int, last_token_ns: int | None) -> dict[str, Any]:
        """The request line's reasoning fields, durations in ms from ``sent_ns``."""
        answer_ms = None
        if self.answer_ns is not None and last_token_ns is not None:
            answer_ms = last_token_ns - self.answer_ns
        return {
            "reasoning_first_ms": _ms(self.first_ns - sent_ns),
            "reasoning_last_ms": _ms(self.last_ns - sent_ns),
            "reasoning_ms": _ms(self.reasoning_ns),
            "answer_ms": _ms(answer_ms),
            "reasoning_chunks": self.chunks,
            "answer_chunks": self.answer_chunks,
            "reasoning_itl_ms": _ms(
                (self.last_ns - self.first_ns) / (self.chunks - 1) if self.chunks > 1 else None
            ),
            "answer_itl_ms": _ms(
                answer_ms / (self.answer_chunks - 1)
                if answer_ms is not None and self.answer_chunks > 1
                else None
            ),
            "reasoning_tokens_counted": self.counted,
            "reasoning_tokens_reported": self.reported,
            "reasoning_tokens_disagree": self.disagree,
        }

    @classmethod
    def from_json(cls, row: dict[str, Any], sent_ns: int) -> ReasoningSplit | None:
        """The split a line was written from (None for a line of the split ``none``)."""
        way = row.get("reasoning_split")
        if way not in ("field", "think-tags") or row.get("reasoning_first_ms") is None:
            return None
        first = sent_ns + round(row["reasoning_first_ms"] * 1e6)
        ttfa = row.get("ttfa_ms")
        return cls(
            way=str(way),
            first_ns=first,
            last_ns=sent_ns + round(row["reasoning_last_ms"] * 1e6),
            chunks=int(row.get("reasoning_chunks") or 0),
            answer_ns=None if ttfa is None else sent_ns + round(ttfa * 1e6),
            answer_chunks=int(row.get("answer_chunks") or 0),
            tokens=int(row.get("reasoning_tokens") or 0),
            counted=int(row.get("reasoning_tokens_counted") or 0),
            reported=row.get("reasoning_tokens_reported"),
            disagree=bool(row.get("reasoning_tokens_disagree")),
        )


class ReasoningBlock(TypedDict):
    """The ``reasoning`` block of summary.json: the measured ok requests' reasoning
    (present where any of them reasoned)."""

    requests: int
    """Measured ok requests."""
    with_reasoning: int
    """Of those, the ones whose answer came after reasoning."""
    share: float
    """``with_reasoning`` over ``requests``."""
    splits: dict[str, int]
    """Requests by how their reasoning was told from the answer (``SPLIT_WAYS``)."""
    tokens: int
    """Reasoning tokens of the requests that reasoned, all together."""
    answer_tokens: int
    """Their answer tokens (output tokens less reasoning tokens), all together."""
    tokens_per_request: MetricStats
    """Reasoning tokens per request that reasoned (count, percentiles; not ms)."""
    reasoning_ms: MetricStats
    """How long the reasoning held the answer back, per request that reasoned."""
    answer_ms: MetricStats
    """From the first answer token to the last token, per request that reasoned."""
    tokens_disagree: int
    """Requests whose usage reported reasoning tokens that cannot be right."""
