"""What a fault kind declares: one object per kind, registered by its name (the plugin
interface: a third party imports what it needs from here).

A fault kind (the ``kind`` of a ``[[faults.events]]`` table) says, in one place:

- its table's keys beyond the common ones (``kind``, ``at_s``, ``duration_s``, ``name``,
  ``max_failures``) and their validation (``parse``: errors name file, table and key);
- how it is injected (``inject``: the rig's action, played once per run on the
  coordinator, from the window's start; it may wait out the window);
- where it acts when the load is scaled out (``runs``): only in the rig, or also in every
  process that sends load (``load_part``), and what it needs of the deployment;
- how its window is judged: the figures it adds to its ``faults`` entry (``figures``;
  those at the entry's top typed by its own TypedDict, ``figures_model``, which
  summary.json's schema takes from it, and the table prints ``printed_figures``) and its
  own rule (``judge``), or the shared judge (``judge`` returning None); what its
  ``inject`` sees of the window is typed the same way (``observed_model``).

``FaultKindBase`` has a default for each (no keys, a wait over the window, no part in
the load, the shared judge), so a kind writes only what differs. loadtest's own kinds
(``kinds/``) are registered in the entry-point group ``loadtest.faults`` exactly as a
third party's are (``registry.py``; docs/plugins.md).
"""

from __future__ import annotations

import functools
import random
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from loadtest.errors import UsageError
from loadtest.features.faults.event import COORDINATOR, IN_LOAD, FaultEvent, FaultSpec, Runs
from loadtest.features.faults.registry import FaultTable, load_plugin
from loadtest.model.json import JsonObject
from loadtest.model.verdict import FaultVerdict, FaultVerdictWord, Observed, RequestRow
from loadtest.registry import mismatches

if TYPE_CHECKING:
    from loadtest.config.toml_tables import Table
    from loadtest.engine.hooks import CancelOrder, RunContext
    from loadtest.features.faults.proxy import FaultProxy
    from loadtest.features.faults.target import ManagedTarget
    from loadtest.features.scrape import Scraper
    from loadtest.transport.side import SideHttp

__all__ = [
    "COORDINATOR",
    "IN_LOAD",
    "FaultEvent",
    "FaultKind",
    "FaultKindBase",
    "FaultSpec",
    "LoadPart",
    "LoadShare",
    "Rig",
    "Ruling",
    "Runs",
    "Window",
    "fault_kind",
    "num",
    "overrides_part",
    "spec_of",
]

Ruling = tuple[FaultVerdictWord, str]
"""A verdict word and the reason given for it."""


S = TypeVar("S", bound=FaultSpec)


def spec_of(ev: FaultEvent, cls: type[S]) -> S:
    """``ev``'s settings as the kind's own ``cls`` (its defaults where the event was
    built without them, as a test may)."""
    return ev.spec if isinstance(ev.spec, cls) else cls()


def num(t: Table, name: str, default: float, *, strict: bool = False) -> float:
    """A number key of an event's table (``>= 0``; ``strict``: ``> 0``) or ``default``."""
    v = t.number(name, default, strict=strict)
    assert v is not None
    return v


@dataclass(frozen=True, slots=True)
class LoadShare:
    """Which event and which process of the load a ``LoadPart`` is made for."""

    index: int
    """The event's place in the plan (its window number)."""
    worker: int = 0
    workers: int = 1


class LoadPart:
    """A kind's part inside one process of the load; each method a no-op until overridden.

    ``idle_until`` and ``cancel_order`` are on the hot path (once per request): keep them
    cheap. Times are ``perf_counter_ns``; ``t0_ns`` is the run's start.
    """

    def at_start(self, ctx: RunContext) -> Sequence[Coroutine[Any, Any, None]]:
        """Tasks to run from the run's start (cancelled when the load ends)."""
        return ()

    def idle_until(self, t0_ns: int, now_ns: int) -> int | None:
        """If the load must not be offered at ``now_ns``: when it may go on."""
        return None

    def cancel_order(self, t0_ns: int, intended_ns: int, rng: random.Random) -> CancelOrder | None:
        """Whether to cancel a request meant to start at ``intended_ns`` (``rng``: the
        process's own draws, shared by every kind in plan order)."""
        return None


def overrides_part(part: LoadPart, name: str) -> bool:
    """True when ``part``'s class replaces ``LoadPart``'s no-op ``name``."""
    return getattr(type(part), name) is not getattr(LoadPart, name)


class Rig(Protocol):
    """What a kind's ``inject`` may use of the rig that plays the timeline."""

    @property
    def proxy(self) -> FaultProxy | None:
        """The fault proxy in front of the draft, if the deployment has one."""
        ...

    @property
    def target(self) -> ManagedTarget | None:
        """The target loadtest manages, if any."""
        ...

    @property
    def scraper(self) -> Scraper | None:
        """The endpoint's ``/metrics`` scraper, if it has one."""
        ...

    @property
    def http(self) -> SideHttp:
        """The run's TLS and key, for side requests."""
        ...

    @property
    def control(self) -> RunContext:
        """The run (on a coordinator of workers: without its load, see ``in_flight_known``)."""
        ...

    @property
    def in_flight_known(self) -> bool:
        """False on a coordinator of workers: no one count of open requests exists."""
        ...

    async def sleep_to(self, at_s: float) -> None:
        """Sleep until ``at_s`` seconds after the run's start."""
        ...

    def rel_s(self) -> float:
        """Seconds since the run's start, now."""
        ...

    def fill(self, text: str) -> str:
        """``text`` with the deployment's placeholders (``{proxy}``, ``{draft}``) filled."""
        ...

    async def hold_load(self, down: bool) -> None:
        """Hold the load in every process (``down``) or let it go on."""
        ...


@dataclass(frozen=True, slots=True)
class Window:
    """The measured requests around one window, as the judge split them."""

    start_s: float
    end_s: float
    rows: Sequence[RequestRow]
    """Every measured request of the run (warm-up apart)."""
    during: Sequence[RequestRow]
    """Those sent in the window."""
    samples: Sequence[JsonObject]
    """The ``/metrics`` samples of the run."""


@runtime_checkable
class FaultKind(FaultTable, Protocol):
    """What a fault kind declares (an object, registered by its kind's name): its table
    (``keys``, ``runs``, ``parse``: ``registry.FaultTable``) and the rest.

    ``figures_model``, ``observed_model``, ``printed_figures`` and ``served_as``
    (``FaultKindBase``) are read with their defaults where a kind lacks them
    (``entry.figures_model``, ``entry.observed_model``, ``entry.printed_figures``,
    ``entry.served_as``), so they are not members here: a kind written before them still
    loads."""

    @property
    def needs_requests(self) -> bool:
        """The shared judge: a window no request started in is ``not_exercised``."""
        ...

    @property
    def needs_completed(self) -> bool:
        """The shared judge: a window none of whose requests completed is
        ``inconclusive`` (its latency is unknown)."""
        ...

    async def inject(self, ev: FaultEvent, obs: Observed, rig: Rig) -> None:
        """Play the window from its start; write what happened into ``obs`` (its
        ``observed_model``'s keys through ``top_observed``, or ``obs["detail"]``)."""
        ...

    def load_part(self, ev: FaultEvent, share: LoadShare) -> LoadPart | None:
        """Its part in one process of the load (with ``runs.in_load``)."""
        ...

    def figures(self, ev: FaultEvent, w: Window, entry: FaultVerdict) -> None:
        """Add its own figures to its window's ``faults`` entry."""
        ...

    def judge(self, ev: FaultEvent, entry: FaultVerdict) -> Ruling | None:
        """Its own verdict, asked after the shared failure checks (not reached, skipped,
        could not be applied, more failures than allowed); None: the shared judge."""
        ...


class FaultKindBase:
    """A ``FaultKind`` with every default: subclass it and override what differs."""

    keys: frozenset[str] = frozenset()
    runs: Runs = COORDINATOR
    needs_requests: bool = True
    needs_completed: bool = True
    figures_model: type | None = None
    """A TypedDict (``total=False``) of the figures ``figures`` sets at the top of its
    entry, through ``top_figures``: summary.json's schema has them, and a summary is
    checked against them when read back. None: its figures, if any, are in ``detail``."""
    observed_model: type | None = None
    """A TypedDict (``total=False``) of what ``inject`` sets in ``Observed``, through
    ``top_observed``: copied to the top of its entry, where the schema has it and
    ``top_figures`` reads it. None: what it saw, if anything, is in ``detail``."""
    printed_figures: tuple[str, ...] = ()
    """The keys of its entry the table and the dashboard print as ``name value``, in
    order (its figures, what its rig saw); ``detail``'s numbers are printed anyway."""

    def parse(self, t: Table, event: FaultEvent) -> FaultSpec:
        """No keys of its own."""
        return FaultSpec()

    async def inject(self, ev: FaultEvent, obs: Observed, rig: Rig) -> None:
        """Nothing but the window itself: wait it out."""
        await rig.sleep_to(ev.end_s)

    def load_part(self, ev: FaultEvent, share: LoadShare) -> LoadPart | None:
        """No part in the load."""
        return None

    def figures(self, ev: FaultEvent, w: Window, entry: FaultVerdict) -> None:
        """No figures beyond the shared ones."""

    def judge(self, ev: FaultEvent, entry: FaultVerdict) -> Ruling | None:
        """The shared judge."""
        return None

    def served_as(self, entry: FaultVerdict) -> str | None:
        """How the endpoint served through a held window, in the verdict's words ("the
        endpoint ..."), from the kind's own figures; None: "kept serving"."""
        return None


@functools.cache
def fault_kind(kind: str) -> FaultKind:
    """The plugin registered as ``kind``; ``UsageError`` when none is, or it is no
    ``FaultKind``."""
    plugin = load_plugin(kind)
    wrong = mismatches(plugin, FaultKind)
    if wrong or not isinstance(plugin, FaultKind):
        raise UsageError(
            f"the fault kind plugin for {kind!r} does not fit a FaultKind: "
            f"{'; '.join(wrong)} (subclass FaultKindBase): see docs/plugins.md"
        )
    return plugin
