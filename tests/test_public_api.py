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


def test_the_plugin_api_is_one_module_whose_every_name_resolves() -> None:
    import loadtest.plugins as api
    from loadtest.registry import registries

    for name in api.__all__:
        assert getattr(api, name) is not None, name
    # Every extension point a run reads is a group the plugin API names.
    import loadtest.cli.plugins  # noqa: F401 - makes no registry; the command imports them

    for module in (
        "loadtest.app.ab.side_types",
        "loadtest.config.arrivals",
        "loadtest.config.dimensions",
        "loadtest.config.sources",
        "loadtest.config.tables",
        "loadtest.features.faults.registry",
        "loadtest.features.workload_kinds",
        "loadtest.live.outputs",
        "loadtest.model.blocks",
        "loadtest.report.outputs",
    ):
        __import__(module)
    assert set(registries()) == set(api.GROUPS)


def test_the_test_plugin_package_imports_nothing_of_loadtest_but_its_plugin_api() -> None:
    import ast
    from pathlib import Path

    package = Path(__file__).parent / "plugins" / "lines_source" / "loadtest_lines"
    found = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            found += [(path.name, n) for n in names if n.split(".")[0] == "loadtest"]
    assert found, "the walk found no import of loadtest at all"
    assert {n for _, n in found} == {"loadtest.plugins"}, found
