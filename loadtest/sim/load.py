"""The simulator's load model: what a step costs with the batch it carries, and KV room.

A real engine steps every running sequence together. A step's time is a memory-bound
floor (reading the weights once, ``itl_ms``) plus a compute cost per token it carries,
so a step slows as the batch grows::

    step = itl_ms * (base + step_token_share * (T - 1))

``base`` is 1 for a plain step and ``verify_factor`` for a speculative verify step; ``T``
is the tokens in the step: one per decoding sequence, ``spec_k + 1`` per sequence being
verified, and up to ``prefill_chunk_tokens`` per sequence still in its (chunked)
prefill, so a long prompt slows every other stream's inter-token gaps. With per-token
acceptance ``p`` a verify step yields ``m = 1 + p + ... + p^k`` tokens, so speculation
is faster per token only while ``verify_factor + s*(B*(k+1) - 1) < m*(1 + s*(B - 1))``
for ``B`` running sequences: below ``crossover_batch`` (``B*``).

With ``prefill_blocks`` (llama.cpp) a prompt is not chunked: the step that carries it
carries all of it, so every decoding stream's next token waits the whole prefill
(``stall``), and a prompt admitted while another is in prefill waits for it.

KV capacity is counted in tokens: a request reserves its prompt and its whole answer
when admitted and waits (the ``waiting`` gauge) until there is room. A real vLLM
allocates as it goes and preempts instead; reserving up front never preempts.
"""

from __future__ import annotations

import asyncio
import math
from collections import deque

__all__ = ["BatchLoad", "KvBudget", "crossover_batch", "tokens_per_verify_step"]


_STALLS_KEPT_NS = 60_000_000_000
"""How long a blocking prefill is remembered: longer than any gap it could fall in."""


class BatchLoad:
    """Tokens in the running batch, as a step sees them (one object per server)."""

    __slots__ = ("decoding", "prefill_free_ns", "prefilling", "share", "stalls")

    def __init__(self, share: float) -> None:
        self.share = share
        self.stalls: deque[tuple[int, int]] = deque()
        """Blocking prefills, ``(start_ns, length_ns)`` in order: a decoding stream's
        token due after one starts comes that much later (kept for ``_STALLS_KEPT_NS``)."""
        self.prefill_free_ns = 0
        """When the blocking prefills admitted so far are done (``perf_counter_ns``)."""
        self.decoding = 0
        """Sequences past their first token, each one token a plain step."""
        self.prefilling = 0
        """Prompt tokens of the prefill chunks in the current steps."""

    def tokens(self, per_sequence: int = 1) -> int:
        """Tokens in a step: ``per_sequence`` for each decoding sequence, plus prefill."""
        return self.decoding * per_sequence + self.prefilling

    def factor(self, base: float = 1.0, per_sequence: int = 1, own: int = 1) -> float:
        """A step's time over ``itl_ms`` as one sequence sees it: ``base + share * (T -
        own)``, where ``own`` are its own tokens (the floor already pays for one)."""
        return base + self.share * max(0, self.tokens(per_sequence) - own)

    def stall(self, now_ns: int, prefill_ns: int) -> int:
        """A blocking prefill of ``prefill_ns`` admitted at ``now_ns``: it starts when the
        prefills before it are done, holds every decoding stream for its length, and
        this returns when it ends (the request's first token)."""
        start = max(now_ns, self.prefill_free_ns)
        self.prefill_free_ns = start + prefill_ns
        self.stalls.append((start, prefill_ns))
        while self.stalls[0][0] < now_ns - _STALLS_KEPT_NS:
            self.stalls.popleft()
        return self.prefill_free_ns

    def stalled(self, after_ns: int, until_ns: int) -> int:
        """The blocking prefill time that starts in ``[after_ns, until_ns)``: what holds
        a token whose gap runs over that span (a prefill that ended the gap's start,
        the stream's own, is not in it)."""
        return sum(n for s, n in self.stalls if after_ns <= s < until_ns)


def tokens_per_verify_step(p: float, k: int) -> float:
    """Expected tokens a verify step yields: its own plus the accepted prefix."""
    return sum(p**i for i in range(k + 1))


def crossover_batch(p: float, k: int, verify_factor: float, share: float) -> float:
    """``B*``: the running sequences above which a verify step costs more per token than
    plain decoding (``inf`` when it never does, 0 when it never pays)."""
    m = tokens_per_verify_step(p, k)
    if share <= 0 or m >= k + 1:
        return math.inf if m > verify_factor else 0.0
    return max(0.0, (m - verify_factor + share * (1 - m)) / (share * (k + 1 - m)))


class KvBudget:
    """KV room in tokens: ``reserve`` waits until a request's tokens fit (0 = unlimited)."""

    __slots__ = ("_room", "capacity", "used")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._room = asyncio.Condition()

    @property
    def usage(self) -> float:
        """The share of the capacity reserved (0 without a limit)."""
        return self.used / self.capacity if self.capacity > 0 else 0.0

    async def reserve(self, tokens: int) -> None:
        """Wait for room for ``tokens``; one request larger than all of it still runs
        alone, as an engine would rather serve it than hang."""
        if self.capacity <= 0:
            return
        async with self._room:
            await self._room.wait_for(lambda: self.used == 0 or self.used + tokens <= self.capacity)
            self.used += tokens

    async def release(self, tokens: int) -> None:
        """Give the room back and wake the waiting requests."""
        if self.capacity <= 0:
            return
        async with self._room:
            self.used -= tokens
            self._room.notify_all()
