"""A fault kind plugin: the load pauses for the window, in every process that sends it.

``pause`` sends no request from ``grace_ms`` after the window's start to its end (a
request already past its check when the window opened may still go out). Its verdict
is its own where it can tell: ``failed`` when a request was sent inside the pause, else
the shared judge (latency before and after, failures around it). Its figures are typed
(``Paused``, ``PauseFigures``): written into the window's ``detail`` and read back as
the same classes, with no field of loadtest's own. Nothing here is part
of loadtest: it uses only the plugin interface a third party sees (docs/plugins.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from loadtest.plugins import (
    IN_LOAD,
    FaultEvent,
    FaultKindBase,
    FaultSpec,
    FaultVerdict,
    LoadPart,
    LoadShare,
    Observed,
    Rig,
    Ruling,
    Table,
    Window,
    figures_of,
    num,
    put_figures,
    spec_of,
)


@dataclass(frozen=True, slots=True)
class PauseSpec(FaultSpec):
    grace_ms: float = 50.0


@dataclass(frozen=True, slots=True)
class Paused:
    """What the rig saw: how long it held the window."""

    paused_s: float


@dataclass(frozen=True, slots=True)
class PauseFigures:
    """Requests sent between the planned edges (after ``grace_ms``): 0 when it held."""

    sent_in_pause: int


class _Paused(LoadPart):
    def __init__(self, ev: FaultEvent) -> None:
        self.at_ns = int(ev.at_s * 1e9)
        self.end_ns = int(ev.end_s * 1e9)

    def idle_until(self, t0_ns: int, now_ns: int) -> int | None:
        start, end = t0_ns + self.at_ns, t0_ns + self.end_ns
        return end if start <= now_ns < end else None


class Pause(FaultKindBase):
    """The ``pause`` kind."""

    keys = frozenset({"grace_ms"})
    runs = IN_LOAD
    needs_requests = False  # it sends nothing by design
    needs_completed = False

    def parse(self, t: Table, event: FaultEvent) -> PauseSpec:
        if event.duration_s <= 0:
            raise t.fail("duration_s", "a pause needs a duration > 0")
        return PauseSpec(grace_ms=num(t, "grace_ms", 50.0))

    async def inject(self, ev: FaultEvent, obs: Observed, rig: Rig) -> None:
        started = rig.rel_s()
        await rig.sleep_to(ev.end_s)
        put_figures(obs, Paused(round(rig.rel_s() - started, 3)))

    def load_part(self, ev: FaultEvent, share: LoadShare) -> LoadPart:
        return _Paused(ev)

    def figures(self, ev: FaultEvent, w: Window, entry: FaultVerdict) -> None:
        # The load pauses on the plan's clock (the rig's window may open and close a
        # moment later): count what was sent between the planned edges.
        from_ms = ev.at_s * 1000 + spec_of(ev, PauseSpec).grace_ms
        sent = sum(1 for r in w.rows if from_ms <= r["sent_ms"] < ev.end_s * 1000)
        put_figures(entry, PauseFigures(sent))

    def judge(self, ev: FaultEvent, entry: FaultVerdict) -> Ruling | None:
        figures = figures_of(entry, PauseFigures)
        if figures is not None and figures.sent_in_pause:
            return "failed", f"{figures.sent_in_pause} requests were sent inside the pause"
        return None


PAUSE = Pause()
