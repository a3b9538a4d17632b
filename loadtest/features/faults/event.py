"""A fault event as the plan holds it, and what a kind declares of it as plain data.

Kept apart from the plugin protocol (``kind.py``), whose types reach into the engine and
the transport: reading a scenario needs only these.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["COORDINATOR", "IN_LOAD", "FaultEvent", "FaultSpec", "Runs"]


@dataclass(frozen=True, slots=True)
class FaultSpec:
    """A kind's own settings, read from its table (a kind subclasses it)."""

    @property
    def extra_sessions(self) -> int:
        """Requests the kind may send at once beyond the load's own concurrency (a burst):
        the client's connection pool is made that much larger."""
        return 0


_NO_SPEC = FaultSpec()


@dataclass(frozen=True, slots=True)
class FaultEvent:
    """One fault window of the timeline: the keys every kind has, and the kind's own."""

    kind: str
    at_s: float
    duration_s: float = 0.0
    name: str = ""
    max_failures: int = 0
    """Failed requests the window may have and still hold."""
    spec: FaultSpec = _NO_SPEC
    """The kind's own settings (its plugin's ``parse``: ``kinds/`` for loadtest's)."""

    @property
    def end_s(self) -> float:
        """When the window closes, in seconds after the run's start."""
        return self.at_s + self.duration_s

    @property
    def label(self) -> str:
        """The name, or the kind and start when it has none."""
        return self.name or f"{self.kind}@{self.at_s:g}s"


@dataclass(frozen=True, slots=True)
class Runs:
    """Where a kind acts when the load is scaled out, and what it needs to act at all."""

    in_load: bool = False
    """It has a part in every process that sends load (``load_part``: each worker runs
    its own, beside the rig's action on the coordinator)."""
    holds_load: bool = False
    """The load holds in every process while it acts (a restarted target is down): the
    coordinator tells local workers through a file, Ray tasks through its control actor."""
    needs_target: bool = False
    """It acts on a target loadtest manages (``[target]`` or the simulator)."""
    needs_proxy: bool = False
    """It acts on the fault proxy in front of a draft."""


COORDINATOR = Runs()
"""Acts once per run, in the rig (on the coordinator of a run with workers)."""
IN_LOAD = Runs(in_load=True)
"""Acts in every process that sends load too."""
