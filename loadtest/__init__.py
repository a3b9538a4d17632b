"""loadtest: load and robustness tests for OpenAI-compatible LLM endpoints.

The public API is what ``__all__`` lists; everything else may change between versions.
"""

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
