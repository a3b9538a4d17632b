"""Telling a stream's reasoning from its answer, chunk by chunk, without I/O.

The readers (``protocol.openai``, ``protocol.responses``) tell ``ThinkSplit`` what
each token chunk carried: reasoning fields (``reasoning``), content text that may hold
raw ``<think>`` tags (``content``, only while ``scanning``), or a tool call (``call``).
Once the answer has begun, content needs no look (``scanning`` is False), so the
readers' fast path for plain text stays as it was.

Raw tags are found across chunk boundaries: content that could still become an
opening tag (``"<th"``, whitespace) is held until it is decided, and the end of the
reasoning so far is kept to find a closing tag cut in two. Whitespace between the
reasoning and the answer (``"\\n\\n"`` after ``</think>``) does not start the answer;
without reasoning the first token chunk does, so that TTFA equals TTFT there.
"""

from __future__ import annotations

from collections.abc import Sequence

from loadtest.model.json import JsonObject
from loadtest.model.reasoning import ReasoningSplit

__all__ = ["ThinkSplit", "reported_reasoning"]

_OPEN = "<think>"
_CLOSE = "</think>"
_START, _HELD, _THINK, _AFTER, _ANSWER = range(5)


class ThinkSplit:
    """The split of one response; fed by its reader, read once at the end (``result``)."""

    __slots__ = (
        "_held",
        "_state",
        "_tail",
        "answer_at",
        "chars",
        "reasoning_ns",
        "scanning",
        "way",
    )

    def __init__(self) -> None:
        self.way = "none"
        self.reasoning_ns: list[int] = []
        """Arrival of each token chunk that carried reasoning."""
        self.chars = 0
        """Characters of reasoning (tags included)."""
        self.answer_at = -1
        """Index (in the reader's token chunks) of the first answer chunk; -1 until then."""
        self.scanning = True
        """Content must be shown to ``content``: the answer has not begun."""
        self._state = _START
        self._held: list[tuple[int, int]] = []
        """Chunks (arrival, index) of content that may yet open a think block."""
        self._tail = ""
        """The held text, or the last characters of the think block so far."""

    def reasoning(self, text: str, now_ns: int) -> None:
        """A chunk at ``now_ns`` carried ``text`` in a reasoning field."""
        if self._state in (_START, _HELD, _AFTER):
            self._held.clear()  # whitespace before reasoning belongs to neither part
            self._tail = ""
            self._state = _AFTER
            self.way = "field"
        self.reasoning_ns.append(now_ns)
        self.chars += len(text)

    def content(self, text: str, now_ns: int, index: int) -> None:
        """Chunk ``index``, at ``now_ns``, carried content ``text`` (while ``scanning``)."""
        state = self._state
        if state == _AFTER:
            if text.strip():
                self._answer(index)
        elif state == _THINK:
            self._think(text, now_ns, index)
        elif state != _ANSWER:
            self._opening(text, now_ns, index)

    def call(self, index: int) -> None:
        """Chunk ``index`` carried a tool call: the answer, if it had not begun."""
        if self._state != _ANSWER:
            self._answer(self._held[0][1] if self._held else index)

    def _answer(self, index: int) -> None:
        self.answer_at = index
        self._state = _ANSWER
        self.scanning = False
        self._held.clear()

    def _opening(self, text: str, now_ns: int, index: int) -> None:
        """Content before anything else: an opening tag, or the answer's first text."""
        self._held.append((now_ns, index))
        buf = (self._tail + text).lstrip()
        if buf.startswith(_OPEN):
            self.way = "think-tags"
            self._state = _THINK
            # The chunks held so far began the think block; this one's time _think adds.
            self.reasoning_ns += [t for t, _ in self._held[:-1]]
            self._held.clear()
            self._tail = ""
            self._think(buf[len(_OPEN) :], now_ns, index, opened=len(_OPEN))
        elif _OPEN.startswith(buf):
            self._state = _HELD
            self._tail = buf
        else:
            self._answer(self._held[0][1])
            self._tail = ""

    def _think(self, text: str, now_ns: int, index: int, opened: int = 0) -> None:
        """Text inside the think block: reasoning up to the closing tag, if it comes."""
        buf = self._tail + text
        end = buf.find(_CLOSE)
        self.reasoning_ns.append(now_ns)
        if end < 0:
            self.chars += len(text) + opened
            self._tail = buf[-(len(_CLOSE) - 1) :]
            return
        rest = buf[end + len(_CLOSE) :]
        self.chars += len(text) + opened - len(rest)
        self._tail = ""
        self._state = _AFTER
        if rest.strip():
            self._answer(index)

    def result(
        self, chunk_ns: Sequence[int], usage: JsonObject | None, tokens: int
    ) -> ReasoningSplit | None:
        """The split of the response whose token chunks arrived at ``chunk_ns`` and whose
        output was ``tokens`` (None where no reasoning was seen)."""
        times = self.reasoning_ns
        if not times:
            return None
        at = self.answer_at
        if at < 0 and self._held:  # content held to the end was the answer's
            at = self._held[0][1]
        answer_chunks = len(chunk_ns) - at if at >= 0 else 0
        total = len(chunk_ns)
        alone = total - len(times)  # chunks of the answer alone (a shared one is in times)
        sent = usage is not None and isinstance(usage.get("completion_tokens"), int)
        # A token a chunk, but for an end token usage counts and no chunk carries: the
        # chunks are the count. More tokens than that came several a chunk (a verify
        # step): shared out over the chunks.
        several = sent and total and tokens > total + 1
        counted = round(tokens * len(times) / total) if several else len(times)
        reported = reported_reasoning(usage)
        # Every chunk carries a token of its own: the bounds no right count can break.
        disagree = reported is not None and (
            reported < len(times) or (sent and reported > tokens - alone)
        )
        return ReasoningSplit(
            way=self.way,
            first_ns=times[0],
            last_ns=times[-1],
            chunks=len(times),
            answer_ns=chunk_ns[at] if at >= 0 else None,
            answer_chunks=answer_chunks,
            tokens=reported if reported is not None else counted,
            counted=counted,
            reported=reported,
            disagree=bool(disagree),
        )


def reported_reasoning(usage: JsonObject | None) -> int | None:
    """Usage's reasoning tokens (chat: ``completion_tokens_details``; Responses API:
    ``output_tokens_details``), None where the server sent none."""
    if not usage:
        return None
    for key in ("completion_tokens_details", "output_tokens_details"):
        details = usage.get(key)
        if isinstance(details, dict):
            n = details.get("reasoning_tokens")
            if isinstance(n, int) and not isinstance(n, bool):
                return n
    return None
