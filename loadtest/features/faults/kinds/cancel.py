"""``cancel``: loadtest cancels a share of the requests started in the window mid-stream.

Each process of the load draws its own cancellations (``load_part``); the rig waits out
the window, then checks that the endpoint lets go of the cancelled streams (``settle``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from loadtest.engine.hooks import CancelOrder
from loadtest.features.faults.figures import pct
from loadtest.features.faults.kind import (
    IN_LOAD,
    FaultKindBase,
    FaultSpec,
    LoadPart,
    LoadShare,
    Rig,
    Ruling,
    Window,
    num,
    spec_of,
)
from loadtest.features.faults.own_figures import top_figures, top_observed
from loadtest.model.verdict import FaultVerdict, Observed

if TYPE_CHECKING:
    from loadtest.config.toml_tables import Table
    from loadtest.features.faults.plan import FaultEvent

__all__ = ["CANCEL", "CancelFigures", "CancelObserved", "CancelSpec"]


@dataclass(frozen=True, slots=True)
class CancelSpec(FaultSpec):
    """The settings of a cancel window."""

    fraction: float = 0.0
    """Share of the requests started in the window that loadtest cancels."""
    after_tokens: int | None = None
    after_tokens_max: int | None = None
    """Draw the token count uniformly from after_tokens..after_tokens_max."""
    after_ms: float | None = None
    after_ms_max: float | None = None
    settle_s: float = 2.0
    """The endpoint's running count must fall back within this many seconds."""


class CancelFigures(TypedDict, total=False):
    """A cancel window's figures, at the top of its ``faults`` entry."""

    injected_cancels: int
    """Streams the fault cancelled (by intended send time in the planned window)."""
    cancel_close_p50_ms: float | None
    """Median time from the cancel to the connection closed (None: none closed)."""
    cancel_close_max_ms: float | None
    """Likewise, the longest."""


class CancelObserved(TypedDict, total=False):
    """What the rig saw after a cancel window: whether the endpoint let go of the
    cancelled streams (``_settle``)."""

    settle: str
    """Why it was not checked (no ``/metrics``, or the open requests split over workers)."""
    settled_s: float | None
    """Seconds from the window's end until the endpoint held no more requests than the
    client had open (None: it did not within ``settle_s``)."""
    running_excess: int | float | None
    """How many more it held than were open at the last look (0: settled; None: its
    running count was never read)."""


class _Cancels(LoadPart):
    def __init__(self, ev: FaultEvent, index: int) -> None:
        self.index = index
        self.spec = spec_of(ev, CancelSpec)
        self.at_s = ev.at_s
        self.end_s = ev.end_s

    def cancel_order(self, t0_ns: int, intended_ns: int, rng: random.Random) -> CancelOrder | None:
        t = (intended_ns - t0_ns) / 1e9
        s = self.spec
        if not (self.at_s <= t < self.end_s and rng.random() < s.fraction):
            return None
        if s.after_tokens is not None:
            hi = max(s.after_tokens, s.after_tokens_max or s.after_tokens)
            return CancelOrder(self.index, after_tokens=rng.randint(s.after_tokens, hi))
        assert s.after_ms is not None
        hi_ms = max(s.after_ms, s.after_ms_max or s.after_ms)
        return CancelOrder(self.index, after_ms=rng.uniform(s.after_ms, hi_ms))


class Cancel(FaultKindBase):
    """The ``cancel`` kind."""

    keys = frozenset(
        {"fraction", "after_tokens", "after_tokens_max", "after_ms", "after_ms_max", "settle_s"}
    )
    runs = IN_LOAD
    # Its requests are cut on purpose: none need complete for the window to be judged.
    needs_completed = False
    figures_model = CancelFigures
    observed_model = CancelObserved
    printed_figures = ("injected_cancels", "cancel_close_p50_ms", "settled_s")

    def parse(self, t: Table, event: FaultEvent) -> CancelSpec:
        """``fraction`` in (0, 1], one of ``after_tokens`` and ``after_ms``, a duration."""
        spec = CancelSpec(
            fraction=num(t, "fraction", 0.0),
            after_tokens=t.integer("after_tokens", None, minimum=1),
            after_tokens_max=t.integer("after_tokens_max", None, minimum=1),
            after_ms=t.number("after_ms", None),
            after_ms_max=t.number("after_ms_max", None),
            settle_s=num(t, "settle_s", 2.0, strict=True),
        )
        if not 0.0 < spec.fraction <= 1.0:
            raise t.fail("fraction", f"expected a share in (0, 1], got {spec.fraction!r}")
        if (spec.after_tokens is None) == (spec.after_ms is None):
            raise t.fail("after_tokens", "a cancel event needs after_tokens or after_ms (one)")
        if event.duration_s <= 0:
            raise t.fail("duration_s", "a cancel window needs a duration > 0")
        return spec

    async def inject(self, ev: FaultEvent, obs: Observed, rig: Rig) -> None:
        """The load cancels; the rig waits out the window, then watches it settle."""
        await rig.sleep_to(ev.end_s)
        obs["end_s"] = rig.rel_s()
        await _settle(spec_of(ev, CancelSpec).settle_s, obs, rig)

    def load_part(self, ev: FaultEvent, share: LoadShare) -> LoadPart:
        """The cancellations, drawn in each process of the load."""
        return _Cancels(ev, share.index)

    def figures(self, ev: FaultEvent, w: Window, entry: FaultVerdict) -> None:
        """How many requests were cancelled and how fast their streams closed."""
        # Counted as they were drawn (``_Cancels.cancel_order``): by intended time in the
        # planned window. A request due just before the window's end can be sent just
        # after it, and the sent-time window then missed one (a flaky count in CI).
        lo, hi = ev.at_s * 1000, ev.end_s * 1000
        cancelled = [
            r
            for r in w.rows
            if r.get("injected_cancel") and lo <= r.get("intended_ms", r["sent_ms"]) < hi
        ]
        close = [c for r in cancelled if (c := r.get("cancel_close_ms")) is not None]
        figures = top_figures(entry, CancelFigures)
        figures["injected_cancels"] = len(cancelled)
        figures["cancel_close_p50_ms"] = pct(close, 50)
        figures["cancel_close_max_ms"] = round(max(close), 3) if close else None

    def judge(self, ev: FaultEvent, entry: FaultVerdict) -> Ruling | None:
        """Not exercised without a cancellation; failed where cancelled streams kept
        their slots."""
        if not top_figures(entry, CancelFigures).get("injected_cancels"):
            return "not_exercised", (
                f"no cancellation was injected ({entry['started_in_window']} requests "
                "started in the window)"
            )
        seen = top_figures(entry, CancelObserved)
        if seen.get("settled_s", 0) is None:
            return "failed", (
                f"the endpoint still held {seen.get('running_excess')} more requests than "
                f"the client had open {spec_of(ev, CancelSpec).settle_s:g} s after the "
                "cancellations: cancelled streams kept slots"
            )
        return None


async def _settle(settle_s: float, obs: Observed, rig: Rig) -> None:
    """After the cancel window: does the endpoint let go of the cancelled streams?

    The endpoint never holds more requests than the client has open: every request
    it runs *or queues* is one the client still waits for. Running alone is not
    enough: with as many sessions as slots a leaked slot never makes running exceed
    in flight, it makes the client's next request wait in the queue instead. So the
    check is running + waiting <= in flight, within ``settle_s``.
    """
    scraper, control = rig.scraper, rig.control
    seen = top_observed(obs, CancelObserved)
    if scraper is None:
        seen["settle"] = "not checked: the endpoint has no /metrics"
        return
    if not rig.in_flight_known:
        seen["settle"] = "not checked: with --workers the open requests are split over processes"
        return
    t0 = time.perf_counter()
    excess = None
    while time.perf_counter() - t0 <= settle_s:
        with contextlib.suppress(Exception):
            open_before = control.in_flight
            row = await scraper.sample()
            # The scrape read the server at some moment between these two counts.
            open_max = max(open_before, control.in_flight)
            if "running" in row:
                held = row["running"] + row.get("waiting", 0)
                excess = round(held - open_max)
                if excess <= 0:
                    seen["settled_s"] = round(time.perf_counter() - t0, 4)
                    seen["running_excess"] = 0
                    return
        await asyncio.sleep(0.05)
    seen["settled_s"] = None
    seen["running_excess"] = excess


CANCEL = Cancel()
