"""The public surface is deliberate: a change to it shows up here."""

from __future__ import annotations

import pytest

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


def test_names_resolve_on_first_use() -> None:
    # PEP 562: every listed name is importable, listed by dir(), and nothing else is.
    assert set(loadtest.__all__) <= set(dir(loadtest))
    assert loadtest.Runner is loadtest.Runner  # cached after the first access
    with pytest.raises(AttributeError, match="not_a_name"):
        loadtest.not_a_name  # noqa: B018
