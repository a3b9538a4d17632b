"""The simulator's KV capacity, counted in tokens, and vLLM's preemption when it is full.

Requests are admitted first come, first served while their tokens fit; the head of the
queue blocks the ones behind it, as vLLM's scheduler stops at the first waiting request
it cannot allocate. Two ways to count a request's tokens:

- ``preempt`` (vLLM): a request is admitted when its prompt fits, and its answer takes
  room token by token. When a running request needs a token and the pool is full, the
  request admitted last is preempted: its room is freed, it waits at the front of the
  queue, and when it is admitted again it recomputes its prompt and the tokens it had
  (a prefill of all of them) before it decodes on. Each preemption is counted
  (``vllm:num_preemptions``). A request that is itself the last admitted preempts
  itself, so the older ones go on.
- reserve (``preempt`` off): a request reserves its prompt and its whole answer when
  admitted and never grows, so nothing is ever preempted, and requests wait instead.

A capacity of 0 is unlimited: nothing waits, nothing is counted.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable

from loadtest.sim.load import BatchLoad

__all__ = ["KvLease", "KvPool", "KvStream"]


class KvLease:
    """One request's room in the pool."""

    __slots__ = ("entry", "evictions", "held", "on_preempt", "preempted", "preemptible", "running")

    def __init__(self, preemptible: bool) -> None:
        self.preemptible = preemptible
        """False for a request that cannot notice it (a whole, unstreamed answer): it
        holds its whole need from admission and is never chosen."""
        self.held = 0
        """Tokens it holds now (0 while preempted)."""
        self.running = False
        """Admitted and not released nor preempted: only such a lease grows."""
        self.preempted = False
        """Evicted and not admitted again yet."""
        self.evictions = 0
        """Times evicted: each one its stream must recompute (it may be admitted again
        by others' releases before its stream notices)."""
        self.entry: _Entry | None = None
        """Its place in the queue while it waits (a preempted one is queued at once)."""
        self.on_preempt: list[Callable[[], None]] = []
        """Callbacks (no arguments) run when it is evicted: the speculative engine takes
        its sequence out of the batch at once."""


class _Entry:
    __slots__ = ("lease", "tokens", "waiter")

    def __init__(self, lease: KvLease, tokens: int) -> None:
        self.lease = lease
        self.tokens = tokens
        self.waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class KvPool:
    """KV room in tokens, shared by a server's requests (0 = unlimited)."""

    __slots__ = ("_queue", "_running", "capacity", "parked", "preempt", "preemptions", "used")

    def __init__(self, capacity: int, preempt: bool = True) -> None:
        self.capacity = capacity
        self.preempt = preempt and capacity > 0
        self.used = 0
        self.preemptions = 0
        """Evictions so far (``vllm:num_preemptions``)."""
        self.parked = 0
        """Preempted requests not admitted again yet: waiting, not running, for vLLM."""
        self._running: list[KvLease] = []
        """Admitted leases in admission order: the last one is preempted first."""
        self._queue: deque[_Entry] = deque()

    @property
    def usage(self) -> float:
        """The share of the capacity held (0 without a limit)."""
        return self.used / self.capacity if self.capacity > 0 else 0.0

    async def admit(self, tokens: int, preemptible: bool = True) -> KvLease:
        """A lease of ``tokens``, once they fit and every request ahead is admitted.
        One request larger than the whole pool still runs alone, as an engine would
        rather serve it than hang."""
        lease = KvLease(preemptible)
        if self.capacity <= 0:
            return lease
        if not self._queue and self._fits(tokens):
            self._take(lease, tokens)
            return lease
        lease.entry = _Entry(lease, tokens)
        self._queue.append(lease.entry)
        await self._wait(lease)
        return lease

    async def readmit(self, lease: KvLease) -> None:
        """Until a preempted ``lease`` is admitted again (it was queued first when it
        was evicted, with the tokens it held)."""
        if lease.preempted:
            await self._wait(lease)

    def grow(self, lease: KvLease, tokens: int) -> bool:
        """Let ``lease`` hold ``tokens``, preempting the last admitted requests while
        they do not fit; False when ``lease`` itself was preempted (or already was).
        A lease not running (released, or in an unlimited pool) grows nothing."""
        if lease.preempted:
            return False
        if not self.preempt or not lease.running or tokens <= lease.held:
            return True
        extra = tokens - lease.held
        evicted = False
        while self.used + extra > self.capacity:
            victim = next((v for v in reversed(self._running) if v.preemptible), None)
            if victim is None or (victim is lease and len(self._running) == 1):
                break  # alone (larger than the pool): it runs past the capacity
            # Preempting itself, it waits for the room it asked for (what it held fits
            # at once, and the same grow would evict it again after its recompute).
            self._evict(victim, tokens if victim is lease else victim.held)
            evicted = True
            if victim is lease:
                return False
        self.used += extra
        lease.held = tokens
        if evicted:
            self._admit_waiting()
        return True

    def release(self, lease: KvLease) -> None:
        """Give ``lease``'s room back (it is done or gone) and admit who now fits.
        Releasing twice, or a lease still queued, is harmless."""
        if lease.running:
            self._running.remove(lease)
            lease.running = False
        if lease.entry is not None:  # gone while queued (after a preemption)
            if lease.entry in self._queue:
                self._queue.remove(lease.entry)
            lease.entry = None
        self._unpark(lease)
        self.used -= lease.held
        lease.held = 0
        self._admit_waiting()

    def _evict(self, victim: KvLease, tokens: int) -> None:
        self._running.remove(victim)
        victim.running = False
        victim.evictions += 1
        # Queued at once, first (vLLM prepends it to its waiting queue).
        victim.entry = _Entry(victim, tokens)
        self._queue.appendleft(victim.entry)
        self.used -= victim.held
        victim.held = 0
        victim.preempted = True
        self.preemptions += 1
        self.parked += 1
        for callback in victim.on_preempt:
            callback()

    async def _wait(self, lease: KvLease) -> None:
        entry = lease.entry
        assert entry is not None
        self._admit_waiting()  # a lease queued first may fit already
        try:
            await entry.waiter
        except asyncio.CancelledError:
            # Admitted as its request went away, or still queued: either way, let go.
            self.release(lease)
            raise

    def _fits(self, tokens: int) -> bool:
        return not self._running or self.used + tokens <= self.capacity

    def _unpark(self, lease: KvLease) -> None:
        if lease.preempted:
            lease.preempted = False
            self.parked -= 1

    def _take(self, lease: KvLease, tokens: int) -> None:
        self._unpark(lease)
        self.used += tokens
        lease.held = tokens
        lease.running = True
        self._running.append(lease)

    def _admit_waiting(self) -> None:
        queue = self._queue
        while queue and (queue[0].waiter.done() or self._fits(queue[0].tokens)):
            entry = queue.popleft()
            entry.lease.entry = None
            if entry.waiter.done():
                continue  # its request was cancelled in this same loop turn: skip it
            self._take(entry.lease, entry.tokens)
            entry.waiter.set_result(None)


class KvStream:
    """One streamed request's side of the pool: room for each token before it comes,
    and, once preempted, admission again and the recompute."""

    __slots__ = (
        "_seen",
        "chunk_tokens",
        "lease",
        "load",
        "pool",
        "prefill_ns",
        "prompt_tokens",
        "total",
    )

    def __init__(
        self,
        pool: KvPool,
        lease: KvLease,
        tokens: tuple[int, int],
        prefill_ns: Callable[[int], int],
        load: BatchLoad,
        chunk_tokens: int,
    ) -> None:
        self.pool = pool
        self.lease = lease
        self.prompt_tokens, self.total = tokens
        """Its prompt, and its whole answer."""
        self._seen = 0
        """The lease's evictions it has recomputed."""
        self.prefill_ns = prefill_ns
        """What recomputing that many tokens takes, in the batch as it is then."""
        self.load = load
        self.chunk_tokens = chunk_tokens
        """Prompt tokens a prefill adds to each step (the load model's chunk)."""

    def fits(self, generated: int) -> bool:
        """Room for the prompt and ``generated`` answer tokens; False: preempted (and
        not recomputed yet). Its last tokens' room taken, it is no one's victim."""
        if self._seen != self.lease.evictions:
            return False
        if not self.pool.grow(self.lease, self.prompt_tokens + generated):
            return False
        if generated >= self.total:
            self.lease.preemptible = False  # done: it only writes its last frames
        return True

    async def recompute(self) -> None:
        """Wait to be admitted again, then prefill what it held (vLLM's recompute: the
        KV of a preempted request is gone). Preempted again meanwhile, it goes on
        waiting and recomputing until it has come through once."""
        while self._seen != self.lease.evictions:
            self._seen = self.lease.evictions
            await self.pool.readmit(self.lease)  # at once if others' releases did
            if self._seen != self.lease.evictions:
                continue  # evicted again before it could start
            tokens = self.lease.held
            ns = self.prefill_ns(tokens)  # the batch as it is, before its own chunk
            chunk = min(tokens, self.chunk_tokens)  # a prefill: in the others' steps
            self.load.prefilling += chunk
            try:
                await asyncio.sleep(ns / 1e9)
            finally:
                self.load.prefilling -= chunk

    async def make_room(self, generated: int, prefill: int, decode: int) -> None:
        """Until there is room for ``generated`` tokens: while preempted the stream is
        out of the batch (its ``prefill`` chunk and ``decode`` token), then recomputes."""
        while not self.fits(generated):
            self.load.prefilling -= prefill
            self.load.decoding -= decode
            try:
                await self.recompute()
            finally:
                self.load.prefilling += prefill
                self.load.decoding += decode
