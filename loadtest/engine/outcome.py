"""What a run is given beyond the scenario, and what it hands back."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from loadtest.config.scenario import Scenario
from loadtest.measure.recorders import Metrics

__all__ = ["RunConfig", "RunOutcome"]


@dataclass(frozen=True, slots=True)
class RunConfig:
    """Everything a run needs beyond the scenario."""

    scenario: Scenario
    endpoint: str
    model: str
    run_dir: Path
    api_key: str | None = field(default=None, repr=False)
    record_chunks: bool = False
    keepalive: bool = True
    tls: ssl.SSLContext | bool = True
    """aiohttp's ``ssl=``: verify (True), trust a private CA (a context) or not (False)."""
    record_outputs: bool = False
    """Keep a digest and the head of every answer in requests.jsonl."""
    arrival_share: tuple[int, int] = (0, 1)
    """Open loop: ``(i, n)``, worker ``i`` of ``n`` sends arrivals ``i``, ``i + n``, ... of
    the whole plan (``engine.schedule.arrival_offsets_ns``)."""
    arrival_seed: int | None = None
    """The seed the whole plan is drawn from: the run's, where each worker's scenario has
    a seed of its own for its prompts (None: the scenario's)."""
    simulated: bool = False
    """The built-in simulator serves the run: said in run.json, so that a summary rebuilt
    without the simulator's /metrics page still knows its tool calls are random."""


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """What ``Runner.run`` hands to the report: metrics and the run's time frame."""

    metrics: Metrics
    t0_ns: int
    started_wall: float
    duration_s: float
    measured_s: float
    interrupted: bool
    blocks: Mapping[str, tuple[object, ...]] = field(default_factory=dict)
    """Every part of a summary block the hooks handed in (``HookResult.blocks``), by the
    block's name, in hook order; ``engine.blocks.merge_blocks`` makes the blocks (the
    fault verdicts, the scraped server, the agent's tasks, a plugin's own...)."""
