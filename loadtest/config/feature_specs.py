"""The typed values of the scenario tables that features own: ``[faults]``, ``[target]``,
``[sim]``, ``[agent]`` and ``[[tasks]]``.

Plain frozen data, so that a ``Scenario`` can hold them while this layer imports no
feature: each table's checks are its feature's (the fault kinds' own keys, the
simulator's settings), registered by name and found through ``tables``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadtest.config.tables import TableSlot

__all__ = [
    "AGENT",
    "FAULTS",
    "SIM",
    "TARGET",
    "TASKS",
    "AgentSpec",
    "FaultEvent",
    "FaultPlan",
    "FaultSpec",
    "SimSpec",
    "TargetSpec",
    "TaskSource",
]


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
class FaultPlan:
    """The timeline of faults and how their windows are judged."""

    events: tuple[FaultEvent, ...] = ()
    max_degradation: float = 3.0
    """A window holds when its p95 TTFT and TPOT stay within this factor of before."""
    recovery_tolerance: float = 0.10
    """Recovered = median latency back within this share of the level before."""
    proxy_listen: str = "127.0.0.1:0"
    proxy_upstream: str | None = None
    """host:port of the draft server behind the fault proxy (your own deployment)."""
    metrics_url: str | None = None
    """Prometheus endpoint to poll (default: the endpoint's /metrics)."""
    dcgm_url: str | None = None
    """A DCGM exporter's /metrics for GPU memory and power."""
    scrape_interval_s: float = 1.0

    @property
    def extra_sessions(self) -> int:
        """Requests the events may send at once beyond the load's concurrency (bursts)."""
        return sum(e.spec.extra_sessions for e in self.events)


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """An endpoint loadtest manages: started before the run, restarted on the timeline."""

    command: tuple[str, ...]
    ready_url: str
    endpoint: str
    ready_timeout_s: float = 120.0
    stop_timeout_s: float = 10.0


@dataclass(frozen=True, slots=True)
class SimSpec:
    """The built-in simulator's setup: speculative or not, and any SimConfig settings."""

    speculative: bool = False
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """How sessions run: step and retry limits, and how tools are "executed"."""

    max_steps: int = 12
    """Model requests per task (retries not counted) before it ends as ``step_limit``."""
    max_retries: int = 2
    """Re-asks after an invalid call, per step, before the task fails."""
    tool: str = "lognormal"
    """``fixed`` or ``lognormal`` latency, or ``url``: a real HTTP call per tool call."""
    tool_ms: float = 50.0
    """The fixed latency, or the median of the log-normal one."""
    tool_sigma: float = 0.5
    tool_url: str | None = None
    """``url`` mode: POST ``{"name", "arguments"}``; the answer's body is the result."""
    tool_timeout_s: float = 10.0


@dataclass(frozen=True, slots=True)
class TaskSource:
    """One ``[[tasks]]`` table."""

    kind: str
    category: str
    weight: float = 1.0
    subsets: tuple[str, ...] = ()
    path: str | None = None
    limit: int | None = None


# The tables features own, by name: each parsed by its feature (``tables``), read with
# ``FAULTS.of(scenario)`` / ``TARGET.get(scenario)`` and set with ``put``.
FAULTS = TableSlot("faults", FaultPlan, FaultPlan)
TARGET = TableSlot("target", TargetSpec)
"""A managed target: loadtest starts, restarts and stops the endpoint itself."""
SIM = TableSlot("sim", SimSpec, SimSpec)
"""How the built-in simulator is set up when no endpoint is given."""
AGENT = TableSlot("agent", AgentSpec)
"""Agent sessions: each unit of load is a multi-step task (None: single requests)."""
TASKS: TableSlot[tuple[TaskSource, ...]] = TableSlot("tasks", tuple, tuple)
"""The ``[[tasks]]`` sources of an agent scenario."""
