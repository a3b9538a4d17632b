"""How features attach to a run: a base class of no-op hooks and the narrow context.

The engine schedules, sends, accounts and stops; everything else (a fault plan, agent
sessions, server scraping, the interval log, the dashboard feed, process-wide GC
policy) is a ``RunHook`` handed to the ``Runner``. A hook sees a ``RunContext``, never
the runner: what it may read (``t0_ns``, ``run_dir``, ``in_flight``...) and the few
things it may do (``burst``, ``account``, send through ``client``).

Hooks that leave a method alone cost nothing on the hot path: the runner calls a
per-request method (``on_record``, ``idle_until``, ``cancel_order``) only on the hooks
that override it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from loadtest.model.json import JsonObject

if TYPE_CHECKING:
    # Types only: features subclass ``RunHook``, and the scenario module imports feature
    # modules (its plans and specs); importing those here at run time would be a cycle.
    from loadtest.config.scenario import Scenario
    from loadtest.measure.recorders import Metrics, MetricSet
    from loadtest.model.prompt import Prompt
    from loadtest.model.record import RequestRecord
    from loadtest.transport.client import Client
    from loadtest.transport.side import SideHttp

__all__ = ["CancelOrder", "HookResult", "RunContext", "RunHook", "UnitOfLoad", "overrides"]


@dataclass(frozen=True, slots=True)
class CancelOrder:
    """Cancel a request after this many tokens or this many milliseconds (a fault)."""

    window: int
    after_tokens: int | None = None
    after_ms: float | None = None


@dataclass(frozen=True, slots=True)
class HookResult:
    """What a hook hands to the run's outcome: its parts of summary blocks."""

    blocks: Mapping[str, object] = field(default_factory=dict)
    """A part of each block the hook feeds, by the block's registered name (its key in
    summary.json: ``engine.blocks``), as plain JSON data: a part may come from a worker
    process or a Ray task. The engine only collects them (``RunOutcome.blocks``); the
    block merges every part of a run, from every hook, worker and the coordinator."""


class RunContext(Protocol):
    """What a hook may see of and ask of the run."""

    @property
    def t0_ns(self) -> int:
        """The run's start (``perf_counter_ns``); every relative time counts from it."""
        ...

    @property
    def started_wall(self) -> float:
        """The run's start as wall-clock seconds since the epoch."""
        ...

    @property
    def run_dir(self) -> Path:
        """Where the run's files go."""
        ...

    @property
    def scenario(self) -> Scenario:
        """The scenario being run."""
        ...

    @property
    def model(self) -> str:
        """The model name requests ask for."""
        ...

    @property
    def metrics(self) -> Metrics:
        """The run's metrics (read them; the engine adds to them)."""
        ...

    @property
    def in_flight(self) -> int:
        """Requests open in the client now."""
        ...

    @property
    def client(self) -> Client:
        """The open client (only between ``on_start`` and ``on_finish``)."""
        ...

    @property
    def side_http(self) -> SideHttp:
        """How side requests (scrapes, hook actions, tool calls) reach servers."""
        ...

    def burst(self, n: int) -> None:
        """Send ``n`` units now, beside the schedule (a fault's burst after idling)."""
        ...

    def end_load(self, reason: str) -> None:
        """End the load as its bound would (a stop rule fired, ``reason`` says why):
        nothing more is offered, requests in flight get the grace period. Not an
        interruption: the run is complete up to here."""
        ...

    def warming_up_at(self, ns: int) -> bool:
        """True when a unit intended at ``ns`` falls in the warm-up."""
        ...

    def account(self, rec: RequestRecord, prompt: Prompt, extra: JsonObject | None = None) -> None:
        """Count one finished request and write its line (``extra`` fields added)."""
        ...


class RunHook:
    """A feature attached to a run; every method is a no-op until overridden.

    Order: ``before_start`` (before the run's clock starts), ``on_start``, then while
    the run goes ``on_tick``/``on_interval`` once a second and the per-request calls,
    then ``on_finish`` (always, also when the run fails or is cancelled), ``result``.
    """

    def before_start(self) -> None:
        """Before ``t0``: set-up whose cost must not count as the run's time."""

    async def on_start(self, ctx: RunContext) -> None:
        """The client is open and ``t0`` taken; the load starts right after."""

    def on_tick(self, now_ns: int) -> None:
        """Once a second, before the interval rolls (the last interval handed out is
        about to be cleared for reuse)."""

    def on_interval(self, interval: MetricSet, start_s: float, length_s: float) -> None:
        """The interval just rolled; valid until the next ``on_tick``."""

    def on_record(self, rec: RequestRecord) -> None:
        """A request was accounted (the hot path: keep it cheap)."""

    def idle_until(self, now_ns: int) -> int | None:
        """If the load must not be offered at ``now_ns``: when it may go on."""
        return None

    def cancel_order(self, intended_ns: int) -> CancelOrder | None:
        """Whether (and when) to cancel a request meant to start at ``intended_ns``."""
        return None

    async def on_finish(self) -> None:
        """The load is over and the last interval rolled: stop and close what was opened."""

    def result(self, run_dir: Path) -> HookResult:
        """What goes into the run's outcome (after every file was closed)."""
        return HookResult()

    def live_parts(self) -> Mapping[str, object]:
        """Its blocks' parts so far, by block name, for the dashboard's panels
        (``SummaryBlock.panel``); taken at most twice a second, so it must be cheap and
        plain JSON data. Empty: no panel while the run goes."""
        return {}

    def live_feed(self) -> Mapping[str, object]:
        """What a view of its blocks in another process reads while the run goes (the
        dashboard's timeline of fault windows, its server panel), by block name: taken
        with each state the dashboard asks for, at most twice a second, so it must be
        cheap; pickled, so plain data. A list is a log it appends to: a consumer is sent
        the entries it has not had. Empty: nothing of it is shown live."""
        return {}


class UnitOfLoad(Protocol):
    """What one scheduled unit runs instead of one request (an agent task)."""

    async def run_unit(self, ctx: RunContext, index: int, intended_ns: int) -> float | None:
        """Run unit ``index``; returns a Retry-After in seconds, if it was told one."""
        ...


def overrides(hook: RunHook, name: str) -> bool:
    """True when ``hook``'s class replaces ``RunHook``'s no-op ``name``."""
    return getattr(type(hook), name) is not getattr(RunHook, name)
