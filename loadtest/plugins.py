"""The one module a plugin imports: every type an extension point hands it or asks of it.

A package that adds a prompt source, a workload, an arrival process, a fault kind, a
scenario table, an output file, a summary block, a stop rule, a live output, a sweep
dimension or an ``ab`` side type imports from here and nowhere else in loadtest; these
names are stable, the modules behind them may move (``tests/test_public_api.py`` holds
the list, and the test plugin package imports only this module). Each extension point is
an entry-point group (``GROUPS``), checked on load against its protocol; ``loadtest
plugins`` lists what is installed.

The names load on first use (PEP 562): a plugin that needs a ``Table`` does not pay for
the report's imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadtest._compat.lazy import lazy_names

if TYPE_CHECKING:
    from loadtest.app.ab.side_types import Launch, SideType, SideTypeBase
    from loadtest.app.run_options import RunOptions
    from loadtest.config.arrivals import ArrivalProcess, Param
    from loadtest.config.dimensions import SweepDimension
    from loadtest.config.scenario import Scenario
    from loadtest.config.source_spec import SourceSpec
    from loadtest.config.sources import SourcePlugin, TypedSource
    from loadtest.config.stop_rules import RunSoFar, StopRule
    from loadtest.config.tables import TableParser, TableSlot
    from loadtest.config.toml_tables import Table
    from loadtest.engine.blocks import BlockBase
    from loadtest.engine.hooks import HookResult, RunContext, RunHook, UnitOfLoad
    from loadtest.engine.request_unit import prompt_body
    from loadtest.errors import (
        DatasetError,
        EndpointError,
        LoadtestError,
        ScenarioError,
        UsageError,
    )
    from loadtest.features.faults.kind import (
        IN_LOAD,
        FaultEvent,
        FaultKind,
        FaultKindBase,
        FaultSpec,
        LoadPart,
        LoadShare,
        Rig,
        Ruling,
        Window,
        num,
        spec_of,
    )
    from loadtest.features.faults.own_figures import (
        figures_of,
        put_figures,
        top_figures,
        top_observed,
    )
    from loadtest.features.faults.registry import FaultTable
    from loadtest.features.workload_kinds import Share, Workload, WorkloadKind
    from loadtest.live.outputs import LiveOutput, LiveOutputKind
    from loadtest.live.view import LiveView
    from loadtest.measure.recorders import Metrics
    from loadtest.model.blocks import BlockModel
    from loadtest.model.prompt import Prompt
    from loadtest.model.record import RequestRecord
    from loadtest.model.summary import Summary
    from loadtest.model.verdict import FaultVerdict, Observed
    from loadtest.registry import DISABLE_ENV, PluginInfo, Registry
    from loadtest.report.outputs import OutputFile, RunResults

__all__ = [
    "DISABLE_ENV",
    "GROUPS",
    "IN_LOAD",
    "ArrivalProcess",
    "BlockBase",
    "BlockModel",
    "DatasetError",
    "EndpointError",
    "FaultEvent",
    "FaultKind",
    "FaultKindBase",
    "FaultSpec",
    "FaultTable",
    "FaultVerdict",
    "HookResult",
    "Launch",
    "LiveOutput",
    "LiveOutputKind",
    "LiveView",
    "LoadPart",
    "LoadShare",
    "LoadtestError",
    "Metrics",
    "Observed",
    "OutputFile",
    "Param",
    "PluginInfo",
    "Prompt",
    "Registry",
    "RequestRecord",
    "Rig",
    "Ruling",
    "RunContext",
    "RunHook",
    "RunOptions",
    "RunResults",
    "RunSoFar",
    "Scenario",
    "ScenarioError",
    "Share",
    "SideType",
    "SideTypeBase",
    "SourcePlugin",
    "SourceSpec",
    "StopRule",
    "Summary",
    "SweepDimension",
    "Table",
    "TableParser",
    "TableSlot",
    "TypedSource",
    "UnitOfLoad",
    "UsageError",
    "Window",
    "Workload",
    "WorkloadKind",
    "figures_of",
    "num",
    "prompt_body",
    "put_figures",
    "spec_of",
    "top_figures",
    "top_observed",
]

GROUPS = {
    "loadtest.sources": "prompt source kinds (SourcePlugin)",
    "loadtest.workloads": "workload kinds, by their source kind's name (WorkloadKind)",
    "loadtest.arrivals": "open-loop arrival processes, by mode (ArrivalProcess)",
    "loadtest.faults": "fault kinds (FaultKind, FaultKindBase)",
    "loadtest.tables": "scenario tables, by table name (TableParser)",
    "loadtest.outputs": "files a finished run writes (OutputFile)",
    "loadtest.blocks": "summary blocks, by their key (BlockBase)",
    "loadtest.stops": "stop rules, by the kind of a [[load.stop]] table (StopRule)",
    "loadtest.live": "live outputs, each with its own flag on run, sweep and ab (LiveOutputKind)",
    "loadtest.dimensions": "sweep dimensions: NAME in --sweep/--search NAME=... (SweepDimension)",
    "loadtest.sides": "ab side types: NAME in --baseline/--candidate NAME:MODE (SideType)",
}
"""Every entry-point group loadtest reads, with what a plugin there must be."""

_HOME = {
    "ArrivalProcess": "loadtest.config.arrivals",
    "Param": "loadtest.config.arrivals",
    "Scenario": "loadtest.config.scenario",
    "SourceSpec": "loadtest.config.source_spec",
    "SourcePlugin": "loadtest.config.sources",
    "TypedSource": "loadtest.config.sources",
    "RunSoFar": "loadtest.config.stop_rules",
    "LiveOutput": "loadtest.live.outputs",
    "LiveOutputKind": "loadtest.live.outputs",
    "LiveView": "loadtest.live.view",
    "StopRule": "loadtest.config.stop_rules",
    "SweepDimension": "loadtest.config.dimensions",
    "Launch": "loadtest.app.ab.side_types",
    "SideType": "loadtest.app.ab.side_types",
    "SideTypeBase": "loadtest.app.ab.side_types",
    "RunOptions": "loadtest.app.run_options",
    "TableParser": "loadtest.config.tables",
    "TableSlot": "loadtest.config.tables",
    "Table": "loadtest.config.toml_tables",
    "HookResult": "loadtest.engine.hooks",
    "RunContext": "loadtest.engine.hooks",
    "RunHook": "loadtest.engine.hooks",
    "UnitOfLoad": "loadtest.engine.hooks",
    "prompt_body": "loadtest.engine.request_unit",
    "DatasetError": "loadtest.errors",
    "EndpointError": "loadtest.errors",
    "LoadtestError": "loadtest.errors",
    "ScenarioError": "loadtest.errors",
    "UsageError": "loadtest.errors",
    "FaultTable": "loadtest.features.faults.registry",
    "figures_of": "loadtest.features.faults.own_figures",
    "put_figures": "loadtest.features.faults.own_figures",
    "top_figures": "loadtest.features.faults.own_figures",
    "top_observed": "loadtest.features.faults.own_figures",
    "Share": "loadtest.features.workload_kinds",
    "Workload": "loadtest.features.workload_kinds",
    "WorkloadKind": "loadtest.features.workload_kinds",
    "Metrics": "loadtest.measure.recorders",
    "BlockModel": "loadtest.model.blocks",
    "Prompt": "loadtest.model.prompt",
    "RequestRecord": "loadtest.model.record",
    "Summary": "loadtest.model.summary",
    "FaultVerdict": "loadtest.model.verdict",
    "Observed": "loadtest.model.verdict",
    "DISABLE_ENV": "loadtest.registry",
    "PluginInfo": "loadtest.registry",
    "Registry": "loadtest.registry",
    "BlockBase": "loadtest.engine.blocks",
    "OutputFile": "loadtest.report.outputs",
    "RunResults": "loadtest.report.outputs",
    **dict.fromkeys(
        (
            "IN_LOAD",
            "FaultEvent",
            "FaultKind",
            "FaultKindBase",
            "FaultSpec",
            "LoadPart",
            "LoadShare",
            "Rig",
            "Ruling",
            "Window",
            "num",
            "spec_of",
        ),
        "loadtest.features.faults.kind",
    ),
}
"""Where each public name lives: imported from there on first access."""


__getattr__, __dir__ = lazy_names(__name__, _HOME, __all__)
