"""The simulator's KV pool on its own: first come, first served; the request admitted
last is preempted when a running one needs room; a preempted one goes first again."""

from __future__ import annotations

import asyncio

import pytest

from loadtest.sim.kv import KvLease, KvPool, KvStream
from loadtest.sim.load import BatchLoad


async def _admitted(pool: KvPool, tokens: int) -> KvLease:
    return await asyncio.wait_for(pool.admit(tokens), 1.0)


async def test_requests_are_admitted_in_order_and_the_head_blocks_the_rest() -> None:
    pool = KvPool(100)
    first = await _admitted(pool, 60)
    big = asyncio.create_task(pool.admit(50))  # does not fit beside the first
    small = asyncio.create_task(pool.admit(10))  # would fit, but waits behind it
    await asyncio.sleep(0.01)
    assert not big.done() and not small.done() and pool.used == 60
    pool.release(first)
    await asyncio.wait_for(asyncio.gather(big, small), 1.0)
    assert pool.used == 60 and pool.preemptions == 0


async def test_the_request_admitted_last_is_preempted_for_a_running_one() -> None:
    pool = KvPool(100)
    old, mid, new = [await _admitted(pool, 30) for _ in range(3)]
    evicted: list[str] = []
    new.on_preempt.append(lambda: evicted.append("new"))
    assert pool.grow(old, 50)  # 20 more than the 10 free: the newest goes
    assert (new.preempted, new.held, evicted, pool.preemptions) == (True, 0, ["new"], 1)
    assert pool.used == 80 and pool.parked == 1
    assert not pool.grow(new, 31)  # it knows it was preempted at its next token
    # The newest running one needing room preempts itself, so the older ones go on.
    assert not pool.grow(mid, 60) and mid.preempted and pool.used == 50
    assert not old.preempted and pool.preemptions == 2 and pool.parked == 2


async def test_a_preempted_request_is_admitted_again_before_newcomers() -> None:
    pool = KvPool(100)
    old, small, new = [await _admitted(pool, n) for n in (40, 15, 30)]
    blocked = asyncio.create_task(pool.admit(50))  # 15 free: it waits
    await asyncio.sleep(0.01)
    assert pool.grow(old, 60)  # 5 short: new is preempted, and queued first at once
    assert new.preempted and new.held == 0 and pool.used == 75
    again = asyncio.create_task(pool.readmit(new))
    await asyncio.sleep(0.01)
    assert not again.done() and not blocked.done()  # 25 free: neither fits
    pool.release(small)  # 40 free: room for the preempted one's 30, not the newcomer's 50
    await asyncio.wait_for(again, 1.0)
    assert not new.preempted and new.held == 30 and pool.parked == 0
    await asyncio.sleep(0.01)
    assert not blocked.done() and pool.used == 90
    pool.release(old)
    await asyncio.wait_for(blocked, 1.0)
    assert pool.used == 30 + 50


async def test_a_request_that_preempted_itself_heads_the_queue() -> None:
    pool = KvPool(100)
    old, new = await _admitted(pool, 30), await _admitted(pool, 30)
    blocked = asyncio.create_task(pool.admit(45))  # 40 free: it waits
    await asyncio.sleep(0.01)
    assert not pool.grow(new, 75)  # 45 more: it preempts itself (30 freed), queued for 75
    again = asyncio.create_task(pool.readmit(new))
    await asyncio.sleep(0.01)
    # 70 free: the newcomer's 45 would fit, but the preempted request is first.
    assert pool.used == 30 and not again.done() and not blocked.done()
    pool.release(old)
    await asyncio.wait_for(again, 1.0)
    assert new.held == 75 and pool.used == 75 and not blocked.done()
    pool.release(new)
    await asyncio.wait_for(blocked, 1.0)


async def test_alone_a_request_runs_past_the_capacity_and_whole_answers_are_never_chosen() -> None:
    pool = KvPool(50)
    whole = await asyncio.wait_for(pool.admit(40, preemptible=False), 1.0)
    stream = await _admitted(pool, 5)
    assert not pool.grow(stream, 20) and stream.preempted  # itself, not the whole answer
    pool.release(stream)
    assert pool.parked == 0 and pool.used == 40
    alone = KvPool(50)
    lease = await _admitted(alone, 45)
    assert alone.grow(lease, 80) and alone.used == 80 and alone.preemptions == 0
    assert whole.held == 40


async def test_waiters_cancelled_together_leave_the_pool_whole() -> None:
    pool = KvPool(100)
    first = await _admitted(pool, 90)
    waiters = [asyncio.create_task(pool.admit(n)) for n in (50, 5)]
    await asyncio.sleep(0.01)
    for w in waiters:
        w.cancel()
    pool.release(first)  # in the same loop turn: their futures are cancelled, not set
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(r, asyncio.CancelledError) for r in results), results
    assert pool.used == 0 and await _admitted(pool, 100) is not None


async def test_a_released_lease_grows_nothing_and_evicts_no_one() -> None:
    pool = KvPool(100)
    done, other = await _admitted(pool, 50), await _admitted(pool, 40)
    pool.release(done)
    assert pool.grow(done, 200)  # a stream that ended: its engine step comes too late
    assert pool.used == 40 and not other.preempted and pool.preemptions == 0


async def test_a_waiter_that_goes_away_lets_the_next_one_in() -> None:
    pool = KvPool(100)
    first = await _admitted(pool, 90)
    gone = asyncio.create_task(pool.admit(50))
    behind = asyncio.create_task(pool.admit(5))
    await asyncio.sleep(0.01)
    gone.cancel()
    await asyncio.wait_for(behind, 1.0)  # the head left: 5 fits beside the 90
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert pool.used == 95
    pool.release(first)
    pool.release(first)  # twice is harmless: a request's end and its cancel both release
    assert pool.used == 5


async def test_reserving_never_preempts_and_unlimited_never_waits() -> None:
    pool = KvPool(100, preempt=False)
    a = await _admitted(pool, 60)
    assert pool.grow(a, 500) and pool.used == 60  # reserved up front: nothing grows
    free = KvPool(0)
    leases = [await _admitted(free, 10**9) for _ in range(3)]
    assert free.used == 0 and free.usage == 0.0 and all(free.grow(x, 10**10) for x in leases)


def _stream(pool: KvPool, lease: KvLease, prompt: int, recomputed: list[int]) -> KvStream:
    def prefill_ns(tokens: int) -> int:
        recomputed.append(tokens)
        return 1_000_000  # 1 ms

    return KvStream(pool, lease, (prompt, 10), prefill_ns, BatchLoad(0.0), 0)


async def test_a_stream_readmitted_by_others_still_recomputes() -> None:
    pool = KvPool(100)
    a, c, b = [await _admitted(pool, n) for n in (40, 20, 30)]
    recomputed: list[int] = []
    stream = _stream(pool, b, 30, recomputed)
    assert pool.grow(a, 55)  # b is evicted
    pool.release(c)  # room for b's 30: admitted again before its stream looks
    assert not b.preempted and b.held == 30
    assert not stream.fits(1)  # but its KV is gone: it must recompute first
    await asyncio.wait_for(stream.make_room(1, 0, 0), 1.0)
    assert recomputed == [30] and b.held == 31 and pool.preemptions == 1


async def test_a_stream_that_preempts_itself_waits_for_the_room_it_asked_for() -> None:
    pool = KvPool(100)
    whole = await asyncio.wait_for(pool.admit(50, preemptible=False), 1.0)
    lease = await _admitted(pool, 50)
    recomputed: list[int] = []
    stream = _stream(pool, lease, 50, recomputed)
    waiting = asyncio.create_task(stream.make_room(1, 0, 0))  # 51: itself preempted
    await asyncio.sleep(0.05)
    # Queued for the 51 it needs, not the 50 it held (which fit at once, and the same
    # grow evicted it again after every recompute: 20 times in 200 ms).
    assert not waiting.done() and pool.preemptions == 1 and recomputed == []
    pool.release(whole)
    await asyncio.wait_for(waiting, 1.0)
    assert recomputed == [51] and pool.preemptions == 1 and lease.held == 51


async def test_a_stream_with_its_last_tokens_is_no_ones_victim() -> None:
    pool = KvPool(100)
    old, done = await _admitted(pool, 40), await _admitted(pool, 40)
    stream = _stream(pool, done, 40, [])
    assert stream.fits(10)  # all 10 of its answer: it only writes its last frames now
    assert not pool.grow(old, 60)  # 10 short, and the one admitted last is done
    assert old.preempted and not done.preempted
