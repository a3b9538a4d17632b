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

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from loadtest.errors import UsageError
from loadtest.registry import Registry

if TYPE_CHECKING:
    from loadtest.config.toml_tables import Table
    from loadtest.features.faults.event import FaultEvent, FaultSpec, Runs

__all__ = ["FAULTS", "GROUP", "FaultTable", "fault_kinds", "fault_table", "load_plugin"]

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


FAULTS: Registry[FaultTable] = Registry(GROUP, "fault kind", protocol=FaultTable, error=UsageError)


def fault_kinds() -> tuple[str, ...]:
    """The names of every registered kind (loadtest's and installed plugins'), sorted:
    installed metadata lists entry points in no order of ours."""
    return FAULTS.names()


def load_plugin(kind: str) -> FaultTable:
    """The kind registered as ``kind``; ``UsageError`` when none is, or it declares no
    table (each member it lacks named)."""
    return FAULTS.load(kind)


def fault_table(kind: str) -> FaultTable:
    """The kind's table declaration (``load_plugin``: the registry checks it)."""
    return FAULTS.load(kind)
