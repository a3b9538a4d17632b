"""The simulated engine's decode loop: every running sequence steps together.

Like a real continuous-batching engine, one loop steps every running sequence together,
so streams that start together end together and a slow step slows the whole batch.
Without a draft (``lockstep``) a step gives each sequence one token. With a draft (a
speculative target) each step asks the draft server for ``k`` proposals per sequence
(one HTTP call for the whole batch), waits a verify step, and gives each sequence its
own token plus the accepted prefix. When the draft is down, slow past
``draft_timeout_ms`` or answers garbage, the step goes on as plain decoding (one token,
a plain step's time) and the draft is probed again with back-off: the client sees
slower tokens, never an error.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import AsyncGenerator
from typing import Any

import aiohttp
import orjson

from loadtest.sim.kv import KvStream
from loadtest.sim.load import BatchLoad
from loadtest.sim.model import SimConfig, Truth
from loadtest.sim.speculation import DraftHealth, accepted_tokens

__all__ = ["StepEngine"]

_perf = time.perf_counter_ns


class _Sequence:
    __slots__ = (
        "accept_p",
        "event",
        "kv",
        "parked",
        "ready",
        "rng",
        "think",
        "think_p",
        "total",
        "truth",
    )

    def __init__(
        self, total: int, accept_p: float, rng: random.Random, truth: Truth | None
    ) -> None:
        self.truth = truth
        """Where its drafted and accepted tokens are counted (llama.cpp's timings)."""
        self.total = total
        self.ready = 1  # the first token comes out of prefill
        self.accept_p = accept_p
        self.rng = rng
        self.event = asyncio.Event()
        self.kv: KvStream | None = None
        self.parked = False
        """Preempted: out of the batch until admitted again and recomputed."""
        self.think = 0
        self.think_p = accept_p
        """Its first ``think`` tokens are reasoning, drafted with acceptance ``think_p``
        (a step is judged by the part its first token is in)."""


class StepEngine:
    """Decode steps for all running sequences of one target server."""

    def __init__(self, config: SimConfig, load: BatchLoad | None = None) -> None:
        self.config = config
        self.load = load or BatchLoad(config.step_token_share)
        """The server's batch: the engine keeps its decoding count; prefills add to it."""
        self.health = DraftHealth(
            backoff_s=config.probe_backoff_ms / 1000,
            backoff_max_s=config.probe_backoff_max_ms / 1000,
        )
        self._rng = random.Random(config.seed)
        self.drafting = bool(config.draft_url)
        """A speculative target; without a draft, plain decode steps (``lockstep``)."""
        self._kv_grows = config.kv_tokens > 0 and config.kv_preempt
        """Streams take KV room step by step (``_room`` before each step)."""
        self._active: set[_Sequence] = set()
        self._wake = asyncio.Event()
        self._stalled = 0
        """Blocking prefills from here on are in the next step (``perf_counter_ns``)."""
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None
        self._draft = config.draft_url.rstrip("/") + "/draft"
        self.draft_tokens = 0
        self.accepted_tokens = 0
        self.accepted_steps = [0] * (config.spec_k + 1)
        """Verify steps of one sequence by how many proposals they accepted (0..k): a
        vLLM draft each, one integer increment a step (positions are read from it)."""
        self.draft_calls = 0
        """Proposals fetched: one call for the whole batch a step."""
        self.spec_steps = 0
        self.plain_steps = 0
        self._first_verify_s: float | None = None
        self.draft_errors: dict[str, int] = {}

    async def start(self) -> None:
        """Open the draft connection pool (if any) and start the step loop."""
        if self.drafting:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.config.draft_timeout_ms / 1000)
            )
        self._task = asyncio.create_task(self._loop(), name="sim-engine")

    async def close(self) -> None:
        """Stop the loop and close the draft connections."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    @property
    def drafts(self) -> int:
        """Drafts verified, one per sequence a step (``vllm:spec_decode_num_drafts``)."""
        return sum(self.accepted_steps)

    def accepted_per_position(self) -> list[int]:
        """Drafts whose proposal at position ``i`` was accepted, for ``i`` in ``0..k-1``
        (``vllm:spec_decode_num_accepted_tokens_per_pos``): a prefix is accepted, so a
        draft that accepted ``a`` counts at positions ``0..a-1``."""
        out, running = [], 0
        for accepted in range(len(self.accepted_steps) - 1, 0, -1):
            running += self.accepted_steps[accepted]
            out.append(running)
        return out[::-1]

    @property
    def speculating(self) -> bool:
        """False while the target has fallen back to plain decoding (or has no draft)."""
        return self.drafting and self.health.speculating

    async def decode(
        self,
        total: int,
        accept_p: float,
        seed: int,
        truth: Truth | None = None,
        kv: KvStream | None = None,
        think: tuple[int, float] = (0, 0.0),
    ) -> AsyncGenerator[int, None]:
        """Yield how many of ``total`` tokens are ready, each time more are.

        The caller has written the first token (prefill) already; leaving the iteration
        early (a cancelled request) takes the sequence out of the batch at once. With a
        ``kv`` stream, each step needs room for the tokens it may give; a sequence
        preempted leaves the batch until it is admitted again and has recomputed.
        ``think`` is the think segment's tokens and their acceptance.
        """
        seq = _Sequence(total, accept_p, random.Random(seed), truth)
        seq.think, seq.think_p = think
        if kv is not None:
            seq.kv = kv
            kv.lease.on_preempt.append(lambda: self._park(seq))
        self._join(seq)
        try:
            while seq.ready < total:
                await seq.event.wait()
                seq.event.clear()
                if seq.parked:
                    assert kv is not None
                    await kv.recompute()  # evicted again meanwhile: it waits again
                    seq.parked = False
                    seq.event.clear()  # set by a park during the recompute
                    self._join(seq)
                    continue
                yield seq.ready
        finally:
            self._active.discard(seq)
            self.load.decoding = len(self._active)

    def _join(self, seq: _Sequence) -> None:
        self._active.add(seq)
        self.load.decoding = len(self._active)
        self._wake.set()

    def _park(self, seq: _Sequence) -> None:
        """Take a preempted sequence out of the batch (its step's tokens are lost)."""
        self._active.discard(seq)
        self.load.decoding = len(self._active)
        seq.parked = True
        seq.event.set()

    def _room(self, batch: list[_Sequence], tokens: int) -> None:
        """Room for ``tokens`` more each, before the step (vLLM allocates the slots of a
        step's tokens, drafts included, when it schedules it): who gets none is parked."""
        for seq in batch:
            kv = seq.kv
            if kv is None or seq not in self._active or seq.ready >= seq.total:
                continue  # a finished sequence leaves the batch when its stream closes
            if not kv.fits(seq.ready + tokens):
                self._park(seq)

    async def _loop(self) -> None:
        cfg = self.config
        k = cfg.spec_k
        while True:
            if not self._active:
                self._wake.clear()
                await self._wake.wait()
                self._stalled = _perf()  # prefills while none decoded stalled none
            batch = list(self._active)
            speculate = False
            if self.drafting and self.health.should_try(time.monotonic()):
                speculate = await self._propose(len(batch), k)
            if self._kv_grows:  # else no sequence has a KV stream: nothing to check
                self._room(batch, k + 1 if speculate else 1)
                batch = [seq for seq in batch if seq in self._active]
                if not batch:
                    continue
            # The whole step's tokens: k + 1 per sequence verified, plus the prefills.
            self.load.decoding = len(batch)
            if speculate:
                factor = self.load.factor(cfg.verify_factor, per_sequence=k + 1)
            else:
                factor = self.load.factor()
            step_ms = cfg.itl_ms * factor * self.load.pace()
            if cfg.itl_sigma > 0:
                step_ms *= math.exp(self._rng.gauss(0.0, cfg.itl_sigma))
            # A blocking prefill (llama.cpp) admitted since the last step is in this one.
            now = _perf()
            step_ms += self.load.stalled(self._stalled, now) / 1e6
            self._stalled = now
            await asyncio.sleep(step_ms / 1000)
            if speculate:
                self.spec_steps += 1
            else:
                self.plain_steps += 1
            collapsed = False
            if speculate:
                now_s = time.monotonic()
                self._first_verify_s = self._first_verify_s or now_s
                after = cfg.accept_collapse_after_s
                collapsed = after > 0 and now_s - self._first_verify_s >= after
            for seq in batch:
                if seq not in self._active:
                    continue  # cancelled during the step
                n = 1
                if speculate:
                    p = seq.think_p if seq.ready < seq.think else seq.accept_p
                    p = 0.0 if collapsed else p
                    accepted = accepted_tokens(seq.rng, p, k)
                    self.draft_tokens += k
                    self.accepted_tokens += accepted
                    if seq.truth is not None:
                        seq.truth.drafted += k
                        seq.truth.draft_accepted += accepted
                    self.accepted_steps[accepted] += 1
                    n += accepted
                seq.ready = min(seq.total, seq.ready + n)
                seq.event.set()

    async def _propose(self, n: int, k: int) -> bool:
        """Ask the draft for ``n`` x ``k`` proposals; False (and fall back) on any failure."""
        assert self._session is not None
        try:
            async with self._session.post(self._draft, json={"n": n, "k": k}) as resp:
                raw = await resp.read()
                if resp.status != 200:
                    raise ValueError(f"HTTP {resp.status}")
            _check_proposals(orjson.loads(raw), n, k)
        except (aiohttp.ClientError, TimeoutError, ValueError, OSError) as exc:
            kind = type(exc).__name__
            self.draft_errors[kind] = self.draft_errors.get(kind, 0) + 1
            self.health.failed(time.monotonic())
            return False
        self.draft_calls += 1
        self.health.ok(time.monotonic())
        return True


def _check_proposals(data: Any, n: int, k: int) -> None:
    """Raise ValueError unless ``data`` holds ``n`` lists of ``k`` token ids."""
    props = data.get("proposals") if isinstance(data, dict) else None
    if not isinstance(props, list) or len(props) != n:
        raise ValueError("draft answer is not a list of proposals")
    for p in props:
        if not isinstance(p, list) or len(p) != k or not all(isinstance(t, int) for t in p):
            raise ValueError("draft proposal is not k token ids")
