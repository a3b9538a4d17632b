"""loadtest: load and robustness tests for OpenAI-compatible LLM endpoints.

The public API is what ``__all__`` lists; everything else may change between versions.
The names are imported on first use (PEP 562): ``import loadtest`` alone, which every
command and every simulator process does, must not pay for the runner's or the
simulator's imports (aiohttp, numpy, hdrh...).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadtest._compat.lazy import lazy_names

if TYPE_CHECKING:
    from loadtest.config.scenario import Scenario, load_scenario, parse_scenario
    from loadtest.engine.runner import RunConfig, Runner, RunOutcome
    from loadtest.errors import (
        DatasetError,
        EndpointError,
        LoadtestError,
        MissingExtraError,
        MissingPackageError,
        ProtocolError,
        ScenarioError,
        UsageError,
    )
    from loadtest.measure.recorders import Metrics, Snapshot
    from loadtest.model.record import RequestRecord
    from loadtest.sim import InProcessSim, SimConfig, SimProcess

__all__ = [
    "DatasetError",
    "EndpointError",
    "InProcessSim",
    "LoadtestError",
    "Metrics",
    "MissingExtraError",
    "MissingPackageError",
    "ProtocolError",
    "RequestRecord",
    "RunConfig",
    "RunOutcome",
    "Runner",
    "Scenario",
    "ScenarioError",
    "SimConfig",
    "SimProcess",
    "Snapshot",
    "UsageError",
    "load_scenario",
    "parse_scenario",
]

_HOME = {
    "DatasetError": "loadtest.errors",
    "EndpointError": "loadtest.errors",
    "InProcessSim": "loadtest.sim.process",
    "LoadtestError": "loadtest.errors",
    "Metrics": "loadtest.measure.recorders",
    "MissingExtraError": "loadtest.errors",
    "MissingPackageError": "loadtest.errors",
    "ProtocolError": "loadtest.errors",
    "RequestRecord": "loadtest.model.record",
    "RunConfig": "loadtest.engine.runner",
    "RunOutcome": "loadtest.engine.runner",
    "Runner": "loadtest.engine.runner",
    "Scenario": "loadtest.config.scenario",
    "ScenarioError": "loadtest.errors",
    "SimConfig": "loadtest.sim.model",
    "SimProcess": "loadtest.sim.process",
    "Snapshot": "loadtest.measure.recorders",
    "UsageError": "loadtest.errors",
    "load_scenario": "loadtest.config.scenario",
    "parse_scenario": "loadtest.config.scenario",
}
"""Where each public name lives: imported from there on first access."""


__getattr__, __dir__ = lazy_names(__name__, _HOME, __all__)
