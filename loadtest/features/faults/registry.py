"""Fault kinds found by name, through the entry-point group ``loadtest.faults``.

loadtest's own kinds (``kinds/``) are listed in its pyproject.toml as entry points, the
way a third-party package lists its own (docs/plugins.md), so adding a kind edits no
list here, in the plan, the rig or the verdicts. A plugin object is loaded on first use:
the dynamic import is the plugin mechanism, and reading a scenario imports only the
kinds it names.

Reading a scenario needs only a kind's table (``FaultTable``: its keys, their check,
where it runs); the whole plugin (``kind.FaultKind``, with its action and verdict, whose
types reach into the engine) is checked by ``kind.fault_kind``.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from loadtest._compat.plugins import PluginLoadError, load_named, plugin_names
from loadtest.errors import UsageError

if TYPE_CHECKING:
    from loadtest.config.toml_tables import Table
    from loadtest.features.faults.event import FaultEvent, FaultSpec, Runs

__all__ = ["GROUP", "FaultTable", "fault_kinds", "fault_table", "load_plugin"]

GROUP = "loadtest.faults"
"""The entry-point group fault kinds register in."""


@runtime_checkable
class FaultTable(Protocol):
    """What reading a scenario needs of a fault kind."""

    @property
    def keys(self) -> frozenset[str]:
        """The table keys it takes beyond the common ones."""
        ...

    @property
    def runs(self) -> Runs:
        """Where it acts when scaled out, and what it needs."""
        ...

    def parse(self, t: Table, event: FaultEvent) -> FaultSpec:
        """Its own keys, read from ``t`` and checked (``raise t.fail(key, problem)``);
        ``event`` has the common ones. Unknown keys were refused already."""
        ...


@functools.cache
def fault_kinds() -> tuple[str, ...]:
    """The names of every registered kind (loadtest's and installed plugins'), sorted:
    installed metadata lists entry points in no order of ours."""
    return plugin_names(GROUP)


@functools.cache
def load_plugin(kind: str) -> object:
    """The object registered as ``kind``; ``UsageError`` when none is."""
    try:
        return load_named(GROUP, kind, "fault kind")
    except PluginLoadError as exc:
        raise UsageError(str(exc)) from exc


def fault_table(kind: str) -> FaultTable:
    """The kind's table declaration; ``UsageError`` when it has none."""
    plugin = load_plugin(kind)
    if not isinstance(plugin, FaultTable):
        raise UsageError(
            f"the fault kind plugin for {kind!r} declares no keys, runs and parse: see "
            "docs/plugins.md"
        )
    return plugin
