"""The ``agent`` and ``agent_trace`` blocks of ``summary.json``: tasks and replayed sessions."""

from __future__ import annotations

from typing import NotRequired, TypedDict

from loadtest.model.stats import MetricStats, Percentiles

__all__ = [
    "AgentBlock",
    "AgentCategory",
    "AgentSteps",
    "AgentTraceBlock",
    "AgentTraceRecorded",
    "AgentTraceSession",
    "AgentTraceSplit",
]


class AgentSteps(TypedDict):
    """Latencies and step counts of a set of agent tasks."""

    time_to_valid_call_ms: MetricStats
    task_ms: MetricStats
    steps: MetricStats
    retries: MetricStats


class AgentCategory(TypedDict):
    """Tasks of one category of an agent run."""

    tasks: int
    completed: int
    time_to_valid_call_ms: NotRequired[MetricStats]
    task_ms: NotRequired[MetricStats]
    steps: NotRequired[MetricStats]
    retries: NotRequired[MetricStats]


class AgentBlock(AgentSteps):
    """The ``agent`` section: tasks, their outcomes and step latencies."""

    tasks: int
    completed: int
    failed: int
    step_limit: int
    cancelled: int
    warmup: int
    errors: dict[str, int]
    completion_rate: float | None
    validity_rate: float | None
    expected_match_rate: float | None
    time_shares: dict[str, Percentiles]
    by_category: dict[str, AgentCategory]


class AgentTraceSplit(TypedDict):
    """Where session time went, in ms: the parts add up to ``session_ms``."""

    session_ms: float
    """From the first call's intended send to the last call's end."""
    ttft_ms: float
    """In model calls until their first token (queue and prefill)."""
    decode_ms: float
    """In model calls from their first token to their end."""
    tools_ms: float
    """The recorded tool runs (``execute_tool`` spans) between calls, replayed as waits."""
    other_ms: float
    """The rest: the agent's own recorded work between calls, and the driver's lag."""
    reasoning_ms: NotRequired[float]
    """Of ``decode_ms``: from each call's first reasoning token to its first answer token
    (present when a call reasoned, #47)."""


class AgentTraceRecorded(TypedDict):
    """Where session time went as recorded, in ms (a span has no first-token time)."""

    session_ms: float
    model_ms: float
    tools_ms: float
    other_ms: float


class AgentTraceSession(AgentTraceSplit):
    """One replayed session (``agent-trace`` source)."""

    trace_id: str
    calls: int
    recorded_session_ms: float
    """The same session as the trace recorded it."""
    gap_lag_ms_max: float
    """The latest a call went out past its predecessor's end plus the recorded gap."""


class AgentTraceBlock(TypedDict):
    """The ``agent_trace`` section: recorded agent sessions replayed, and where their
    time went (``agent-trace`` source)."""

    sessions_in_trace: int
    replayed: int
    """Measured sessions that ended (completed or failed); warm-up ones are left out."""
    completed: int
    failed: int
    calls: int
    """Model calls of the completed sessions."""
    total: AgentTraceSplit | None
    """Summed over completed sessions; None with none completed (no data)."""
    recorded: AgentTraceRecorded | None
    """The same sessions as the trace recorded them."""
    decode_share: float | None
    """decode_ms / session_ms: the most any decode speedup (speculation) can save."""
    generation_share: float | None
    """(ttft_ms + decode_ms) / session_ms: the most a faster model can save."""
    reasoning_share: NotRequired[float]
    """reasoning_ms / session_ms, when a call reasoned: the wait a draft that predicts
    the reasoning can shorten."""
    gap_lag_ms_max: float | None
    sessions: list[AgentTraceSession]
    """The first ``sessions_listed`` completed sessions, in the order they ended."""
    sessions_listed: int
