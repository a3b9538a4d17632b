"""Fault kinds found by name, through the entry-point group ``loadtest.faults``.

loadtest's own kinds (``kinds/``) are listed in its pyproject.toml as entry points, the
way a third-party package lists its own (docs/plugins.md), so adding a kind edits no
list here, in the plan, the rig or the verdicts. A plugin object is loaded on first use:
the dynamic import is the plugin mechanism, and reading a scenario imports only the
kinds it names.
"""

from __future__ import annotations

import functools

from loadtest._compat.plugins import group_entry_points
from loadtest.errors import UsageError
from loadtest.features.faults.kind import FaultKind

__all__ = ["GROUP", "fault_kind", "fault_kinds"]

GROUP = "loadtest.faults"
"""The entry-point group fault kinds register in."""


@functools.cache
def fault_kinds() -> tuple[str, ...]:
    """The names of every registered kind (loadtest's and installed plugins'), in the
    order registered: loadtest's own first."""
    return tuple(dict.fromkeys(ep.name for ep in group_entry_points(GROUP)))


@functools.cache
def fault_kind(kind: str) -> FaultKind:
    """The plugin registered as ``kind``; ``UsageError`` when none is, or it is no
    ``FaultKind``."""
    found = [ep for ep in group_entry_points(GROUP) if ep.name == kind]
    if not found:
        raise UsageError(f"no fault kind {kind!r} is installed (known: {', '.join(fault_kinds())})")
    plugin = found[0].load()
    if not isinstance(plugin, FaultKind):
        raise UsageError(
            f"the fault kind plugin {found[0].value!r} ({kind}) lacks what a FaultKind "
            "declares (keys, runs, parse, inject, load_part, figures, judge): see "
            "docs/plugins.md"
        )
    return plugin
