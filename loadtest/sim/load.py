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

With ``prefill_stall`` (llama.cpp: 1) a prompt is not chunked: the step that carries it
carries all of it, so every decoding stream's next token waits out that share of the
prefill, prompts admitted together are prefilled together, and a prompt admitted while
another is in prefill waits for it.

KV capacity, and preemption when it is full, is ``loadtest.sim.kv``.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import deque

__all__ = ["BatchLoad", "Pace", "Prefill", "crossover_batch", "tokens_per_verify_step"]


_STALLS_KEPT_NS = 60_000_000_000
"""How long a blocking prefill is remembered: longer than any gap it could fall in."""


class Prefill:
    """One blocking prefill step: the prompts admitted together, processed in one batch."""

    __slots__ = ("end_ns", "share", "start_ns")

    def __init__(self, start_ns: int, end_ns: int, share: float) -> None:
        self.share = share
        """Of its length, what the decoding streams wait out."""
        self.start_ns = start_ns
        self.end_ns = end_ns
        """When its prompts' first tokens come (moves while prompts join it)."""

    async def done(self) -> None:
        """Until the step is over, however long prompts that joined it made it."""
        left = self.end_ns - time.perf_counter_ns()
        if left > 0:
            await asyncio.sleep(left / 1e9)
            await self.done()  # prompts may have joined it meanwhile


class Pace:
    """A log-normal factor shared by every step, drawn anew every ``period_ns``."""

    __slots__ = ("_next_ns", "_now", "_rng", "period_ns", "sigma")

    def __init__(self, sigma: float, period_ns: int, seed: int) -> None:
        self.sigma = sigma
        self.period_ns = max(1, period_ns)
        self._rng = random.Random(seed)
        self._next_ns = 0
        self._now = 1.0

    def now(self) -> float:
        """The factor in force now (a new draw once its period is over)."""
        t = time.perf_counter_ns()
        if t >= self._next_ns:
            self._now = math.exp(self._rng.gauss(0.0, self.sigma))
            self._next_ns = t + self.period_ns
        return self._now


class BatchLoad:
    """Tokens in the running batch, as a step sees them (one object per server)."""

    __slots__ = ("_pace", "decoding", "prefilling", "share", "stalls")

    def __init__(self, share: float, pace: Pace | None = None) -> None:
        self.share = share
        self._pace = pace
        self.stalls: deque[Prefill] = deque()
        """Blocking prefills in order: a decoding stream's token due after one starts
        comes that much later (kept for ``_STALLS_KEPT_NS``)."""
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

    def pace(self) -> float:
        """The engine's pace now: the factor every decode step is slowed by (1 without
        a ``pace_sigma``)."""
        return 1.0 if self._pace is None else self._pace.now()

    def prefill(self, now_ns: int, prefill_ns: int, window_ns: int, share: float) -> Prefill:
        """A blocking prefill of ``prefill_ns`` admitted at ``now_ns``. Within
        ``window_ns`` (a step) of the last one's start, or while that one waits, it
        joins it (llama.cpp batches the prompts it finds at a step's start, and their
        first tokens come together); else it starts when the one before is done."""
        last = self.stalls[-1] if self.stalls else None
        if last is not None and now_ns <= last.start_ns + window_ns and last.end_ns > now_ns:
            last.end_ns += prefill_ns
            return last
        start = max(now_ns, last.end_ns if last is not None else 0)
        step = Prefill(start, start + prefill_ns, share)
        self.stalls.append(step)
        while self.stalls[0].end_ns < now_ns - _STALLS_KEPT_NS:
            self.stalls.popleft()
        return step

    def stalled(self, after_ns: int, until_ns: int) -> int:
        """The blocking prefill time that starts in ``[after_ns, until_ns)``: what holds
        a token whose gap runs over that span (a prefill that ended the gap's start,
        the stream's own, is not in it)."""
        held = [p for p in self.stalls if after_ns <= p.start_ns < until_ns]
        return int(sum((p.end_ns - p.start_ns) * p.share for p in held))


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
