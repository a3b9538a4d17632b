"""The draft-network kinds: toxics the TCP fault proxy in front of the draft switches on.

``draft_down``, ``draft_reset``, ``draft_blackhole``, ``draft_latency`` (``latency_ms``,
``jitter_ms``) and ``draft_bandwidth`` (``bytes_per_s``), each one ``ProxyToxic`` naming
its toxic (``proxy.Toxic``). The rig sets the toxic for the window and heals it after;
the verdict counts the server's draft fallbacks inside the window.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from loadtest.features.faults.figures import count_delta
from loadtest.features.faults.kind import (
    FaultKindBase,
    FaultSpec,
    Rig,
    Runs,
    Window,
    num,
    spec_of,
)
from loadtest.features.faults.own_figures import top_figures
from loadtest.features.faults.proxy import Toxic
from loadtest.model.verdict import FaultVerdict, Observed

if TYPE_CHECKING:
    from loadtest.config.toml_tables import Table
    from loadtest.features.faults.plan import FaultEvent

__all__ = [
    "DRAFT_BANDWIDTH",
    "DRAFT_BLACKHOLE",
    "DRAFT_DOWN",
    "DRAFT_LATENCY",
    "DRAFT_RESET",
    "ProxyToxic",
    "ToxicFigures",
    "ToxicSpec",
]


@dataclass(frozen=True, slots=True)
class ToxicSpec(FaultSpec):
    """The settings of a toxic (those its kind takes)."""

    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    bytes_per_s: float = 0.0


class ToxicFigures(TypedDict, total=False):
    """A proxy window's figures, at the top of its ``faults`` entry."""

    fallbacks: int | None
    """Draft fallbacks the server counted inside the window (None: its counter was not
    read on both sides of the window)."""


class ProxyToxic(FaultKindBase):
    """A kind that switches on one toxic of the fault proxy for its window."""

    runs = Runs(needs_proxy=True)
    figures_model = ToxicFigures
    printed_figures = ("fallbacks",)

    def __init__(self, toxic: str, keys: frozenset[str] = frozenset()) -> None:
        self.toxic = toxic
        self.keys = keys

    def parse(self, t: Table, event: FaultEvent) -> ToxicSpec:
        """Its own numbers (>= 0; a bandwidth > 0) and a duration > 0."""
        spec = ToxicSpec(
            latency_ms=num(t, "latency_ms", 0.0),
            jitter_ms=num(t, "jitter_ms", 0.0),
            bytes_per_s=num(t, "bytes_per_s", 0.0),
        )
        if self.toxic == "bandwidth" and spec.bytes_per_s <= 0:
            raise t.fail("bytes_per_s", "a bandwidth limit needs bytes_per_s > 0")
        if event.duration_s <= 0:
            raise t.fail("duration_s", f"a {event.kind} window needs a duration > 0")
        return spec

    async def inject(self, ev: FaultEvent, obs: Observed, rig: Rig) -> None:
        """The toxic on for the window, healed after (skipped without a proxy)."""
        if rig.proxy is None:
            obs["skipped"] = (
                "no fault proxy in front of a draft: set [faults].proxy_upstream to your "
                "draft's host:port, or run without --endpoint"
            )
            return
        s = spec_of(ev, ToxicSpec)
        toxic = Toxic(
            self.toxic, latency_ms=s.latency_ms, jitter_ms=s.jitter_ms, bytes_per_s=s.bytes_per_s
        )
        await rig.proxy.set(toxic)
        obs["start_s"] = rig.rel_s()  # from when the toxic is on, not when it was due
        try:
            await rig.sleep_to(ev.end_s)
        finally:
            await rig.proxy.set(Toxic())
            obs["end_s"] = rig.rel_s()

    def figures(self, ev: FaultEvent, w: Window, entry: FaultVerdict) -> None:
        """The draft fallbacks the server counted inside the window."""
        fallbacks = count_delta(w.samples, "fallbacks", w.start_s, w.end_s)
        top_figures(entry, ToxicFigures)["fallbacks"] = fallbacks

    def served_as(self, entry: FaultVerdict) -> str | None:
        """Plain decoding where the server counted fallbacks in the window."""
        fallbacks = top_figures(entry, ToxicFigures).get("fallbacks")
        if not fallbacks:
            return None
        # The counter counts switches from speculation, not requests served plainly.
        times = "once" if fallbacks == 1 else f"{fallbacks} times"
        return f"fell back to plain decoding (switched {times}, by its fallbacks counter)"


DRAFT_DOWN = ProxyToxic("down")
DRAFT_RESET = ProxyToxic("reset")
DRAFT_BLACKHOLE = ProxyToxic("blackhole")
DRAFT_LATENCY = ProxyToxic("latency", frozenset({"latency_ms", "jitter_ms"}))
DRAFT_BANDWIDTH = ProxyToxic("bandwidth", frozenset({"bytes_per_s"}))
