"""Speculative decoding, modelled without I/O: acceptance, step times, fallback state.

A real verifier runs one target forward pass per step over the whole batch; each
sequence gets one token of its own plus the prefix of the draft's ``k`` proposals that
the target accepts. Accepting token ``i`` requires accepting tokens ``1..i-1``, so with a
per-token acceptance probability ``p`` the accepted count is a truncated geometric draw
and the expected tokens per step are ``1 + p + p^2 + ... + p^k``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from loadtest.model.json import JsonObject

__all__ = [
    "CATEGORIES",
    "DraftHealth",
    "accepted_tokens",
    "expected_tokens_per_step",
    "infer_category",
]

CATEGORIES = ("tool_calls", "code", "multilingual", "chat")

_CODE_MARKERS = ("```", "def ", "class ", "function ", "#include", "import ", "return ")
_CODE_SCAN = 16384
"""Characters of the prompt searched for code markers."""


def infer_category(request: JsonObject) -> str:
    """The category the target sees in a request: what the draft's acceptance hinges on.

    A real server knows nothing of loadtest's categories, so the simulator guesses from
    the body the way acceptance really varies: tool schemas and code are predictable,
    text in other scripts (which a small draft models badly) is not.
    """
    if request.get("tools"):
        return "tool_calls"
    text = _text(request)
    # The head of the prompt is enough to guess from, as for the script below: scanning
    # all of a 32k-token prompt for each marker was most of the simulator's time for a
    # request (docs/benchmarks.md, "Long contexts").
    head = text[:_CODE_SCAN]
    if any(m in head for m in _CODE_MARKERS):
        return "code"
    if text:
        non_ascii = sum(1 for c in text[:2000] if ord(c) > 127)
        if non_ascii / min(len(text), 2000) > 0.2:
            return "multilingual"
    return "chat"


def _text(request: JsonObject) -> str:
    prompt = request.get("prompt")
    if isinstance(prompt, str):
        return prompt
    parts = []
    for m in request.get("messages") or ():
        if isinstance(m, dict) and isinstance(m.get("content"), str):
            parts.append(m["content"])
    return "\n".join(parts)


def accepted_tokens(rng: random.Random, p: float, k: int) -> int:
    """How many of ``k`` proposals the target accepts (a prefix, each with chance ``p``)."""
    n = 0
    while n < k and rng.random() < p:
        n += 1
    return n


def expected_tokens_per_step(p: float, k: int) -> float:
    """Mean tokens one verify step yields: its own token plus the accepted prefix."""
    return 1.0 + sum(p**i for i in range(1, k + 1))


@dataclass(slots=True)
class DraftHealth:
    """Whether the target speculates, and when it next probes a failed draft.

    Pure state with the time passed in: the engine asks ``should_try(now)`` before a
    step and reports ``ok(now)`` or ``failed(now)``; back-off doubles from
    ``backoff_s`` up to ``backoff_max_s`` while the draft keeps failing.
    """

    backoff_s: float
    backoff_max_s: float
    speculating: bool = True
    next_probe_s: float = 0.0
    fallbacks: int = 0
    """Times the target switched from speculation to plain decoding."""
    probes_failed: int = 0
    _current_backoff_s: float = 0.0

    def should_try(self, now_s: float) -> bool:
        """True when this step should ask the draft (speculating, or a probe is due)."""
        return self.speculating or now_s >= self.next_probe_s

    def ok(self, now_s: float) -> None:
        """The draft answered well: speculate again, reset the back-off."""
        self.speculating = True
        self._current_backoff_s = 0.0

    def failed(self, now_s: float) -> None:
        """The draft failed: fall back to plain decoding and schedule the next probe."""
        if self.speculating:
            self.fallbacks += 1
            self._current_backoff_s = self.backoff_s
        else:
            self.probes_failed += 1
            self._current_backoff_s = min(self._current_backoff_s * 2, self.backoff_max_s)
        self.speculating = False
        self.next_probe_s = now_s + self._current_backoff_s
