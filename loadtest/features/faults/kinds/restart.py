"""``restart``: the managed target is stopped (``term`` or ``kill``) and started again.

The rig stops and starts the target; while it is down or loading, the load holds in
every process that sends it (``Runs.holds_load``: the coordinator tells local workers
through a file, Ray tasks through the run's control actor), rather than spinning through refused
connections. The verdict counts the requests the stop caught in flight.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from loadtest.errors import EndpointError
from loadtest.features.faults.kind import (
    FaultKindBase,
    FaultSpec,
    Rig,
    Runs,
    Window,
    num,
    spec_of,
)
from loadtest.features.faults.own_figures import top_figures, top_observed
from loadtest.model.verdict import FaultVerdict, Observed

if TYPE_CHECKING:
    from loadtest.config.toml_tables import Table
    from loadtest.features.faults.plan import FaultEvent

__all__ = ["RESTART", "RestartFigures", "RestartObserved", "RestartSpec"]


@dataclass(frozen=True, slots=True)
class RestartSpec(FaultSpec):
    """The settings of a restart."""

    down_s: float = 0.0
    """Seconds between stopping the target and starting it again."""
    signal: str = "term"
    """``term`` (graceful) or ``kill`` (a crash)."""


class RestartFigures(TypedDict, total=False):
    """A restart's figures, at the top of its ``faults`` entry."""

    caught_in_flight: int
    """Requests in flight at the stop."""
    caught_failed: int
    """Of those, the failed ones."""
    time_to_first_token_s: float | None
    """From the stop to the first token of a request sent after it (None: none had one)."""


class RestartObserved(TypedDict, total=False):
    """What the rig saw of a restart (its moments in seconds from t0)."""

    stopped_s: float
    """When the target had stopped."""
    spawned_s: float
    """When it was started again (after ``down_s``)."""
    ready_s: float
    """When it answered as ready."""
    time_to_ready_s: float
    """Seconds from its start to ready (``ManagedTarget.start``)."""


class Restart(FaultKindBase):
    """The ``restart`` kind."""

    keys = frozenset({"down_s", "signal"})
    runs = Runs(holds_load=True, needs_target=True)
    # The load holds while the target is down: the window sends nothing by design.
    needs_requests = False
    needs_completed = False
    figures_model = RestartFigures
    observed_model = RestartObserved
    printed_figures = ("time_to_ready_s", "time_to_first_token_s", "caught_in_flight")

    def parse(self, t: Table, event: FaultEvent) -> RestartSpec:
        """``down_s`` >= 0, ``signal`` ``term`` or ``kill``."""
        return RestartSpec(
            down_s=num(t, "down_s", 0.0), signal=t.choice("signal", "term", ("term", "kill"))
        )

    async def inject(self, ev: FaultEvent, obs: Observed, rig: Rig) -> None:
        """Stop the target, wait ``down_s``, start it and wait until it is ready."""
        target = rig.target
        if target is None:
            obs["error"] = "no managed target to restart: add a [target] table"
            return
        spec = spec_of(ev, RestartSpec)
        seen = top_observed(obs, RestartObserved)
        await rig.hold_load(True)
        try:
            await target.stop(spec.signal)
            seen["stopped_s"] = rig.rel_s()
            await rig.sleep_to(ev.at_s + spec.down_s)
            spawned = rig.rel_s()
            ready_s = await target.start()
        except EndpointError as exc:
            # Said in the window's verdict: raised here it died with the window's task,
            # and the window was judged as if the target had come back.
            obs["error"] = str(exc)
            return
        finally:
            await rig.hold_load(False)
        seen["ready_s"] = rig.rel_s()
        seen["time_to_ready_s"] = round(ready_s, 4)
        seen["spawned_s"] = spawned
        await rig.sleep_to(ev.end_s)
        obs["end_s"] = max(rig.rel_s(), seen["ready_s"])

    def figures(self, ev: FaultEvent, w: Window, entry: FaultVerdict) -> None:
        """The requests the stop caught in flight, and the first token after it."""
        start = w.start_s * 1000
        caught = [r for r in w.rows if r["sent_ms"] < start <= r["end_ms"]]
        firsts = [
            f
            for r in w.rows
            # Any request's first token counts, also one later cut off by the run's end:
            # the restarted engine answered then.
            if r["sent_ms"] >= start and (f := r["first_token_ms"]) is not None
        ]
        figures = top_figures(entry, RestartFigures)
        figures["caught_in_flight"] = len(caught)
        figures["caught_failed"] = sum(1 for r in caught if r["outcome"] == "failed")
        figures["time_to_first_token_s"] = (
            round((min(firsts) - start) / 1000, 4) if firsts else None
        )


RESTART = Restart()
