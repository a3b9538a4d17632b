"""The public surface is deliberate: a change to it shows up here."""

from __future__ import annotations

import loadtest
from loadtest.errors import LoadtestError


def test_public_names() -> None:
    assert sorted(loadtest.__all__) == loadtest.__all__
    assert set(loadtest.__all__) == {
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
    }
    for name in loadtest.__all__:
        assert getattr(loadtest, name).__doc__, name


def test_every_error_is_a_loadtest_error() -> None:
    for name in loadtest.__all__:
        obj = getattr(loadtest, name)
        if isinstance(obj, type) and name.endswith("Error"):
            assert issubclass(obj, LoadtestError), name
