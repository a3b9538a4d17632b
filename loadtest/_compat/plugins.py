"""Entry points of a plugin group, loadtest's own read from the checkout that runs.

loadtest registers its own plugins (prompt sources, fault kinds) in its pyproject.toml,
exactly as a third-party package registers its. Installed, those entry points are in
loadtest's metadata. But an editable install's metadata is written when it is installed:
a checkout that declares a group added since (or run through ``PYTHONPATH`` beside an
install of another checkout) would find its own plugins missing or stale. So where the
``loadtest`` package imported is a checkout's (a pyproject.toml naming the project
``loadtest`` beside it), loadtest's own entry points come from that file, and every
other distribution's from the metadata.
"""

from __future__ import annotations

import functools
import tomllib
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path

__all__ = ["PluginLoadError", "group_entry_points", "load_as", "load_named", "plugin_names"]

_PROJECT = "loadtest"


@functools.cache
def _checkout_entry_points() -> dict[str, dict[str, str]] | None:
    """The checkout's ``[project.entry-points]`` (None: not a checkout)."""
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        return None
    project = data.get("project", {})
    if project.get("name") != _PROJECT:
        return None
    groups = project.get("entry-points", {})
    return {g: dict(eps) for g, eps in groups.items() if isinstance(eps, dict)}


@functools.cache
def group_entry_points(group: str) -> tuple[EntryPoint, ...]:
    """Every entry point of ``group``: loadtest's own (from the checkout when it runs
    from one) first, then other distributions'. Kept per process: a scan of the
    installed metadata costs milliseconds (docs/benchmarks.md), and was made per source."""
    checkout = _checkout_entry_points()
    found = tuple(entry_points(group=group))
    if checkout is None:
        return found
    own = tuple(EntryPoint(n, v, group) for n, v in checkout.get(group, {}).items())
    others = tuple(ep for ep in found if ep.dist is None or ep.dist.name != _PROJECT)
    return own + others


class PluginLoadError(Exception):
    """No plugin of that name in the group, or it could not be imported: the message
    names the group's kind of plugin, the name, and what is known or what failed. Each
    registry raises it again as the error of its layer (``UsageError``, ``DatasetError``)."""


def plugin_names(group: str) -> tuple[str, ...]:
    """The names registered in ``group``, sorted (the installed metadata has no order)."""
    return tuple(sorted({ep.name for ep in group_entry_points(group)}))


def load_named(group: str, name: str, what: str) -> object:
    """The object registered as ``name`` in ``group`` (``what`` it is, for the message);
    ``PluginLoadError`` when none is or importing it fails."""
    found = [ep for ep in group_entry_points(group) if ep.name == name]
    if not found:
        known = ", ".join(plugin_names(group))
        raise PluginLoadError(f"no {what} {name!r} is installed (known: {known})")
    try:
        return found[0].load()
    except (ImportError, AttributeError) as exc:
        raise PluginLoadError(
            f"the {what} plugin {found[0].value!r} ({name}) could not be loaded: {exc}"
        ) from exc


def load_as(group: str, name: str, what: str, kind: type, members: str) -> object:
    """``load_named``, and ``PluginLoadError`` too when the object is no ``kind`` (a
    runtime-checkable protocol): the message names the ``members`` it must have."""
    plugin = load_named(group, name, what)
    if not isinstance(plugin, kind):
        raise PluginLoadError(
            f"the {what} plugin for {name!r} has no {members}: see docs/plugins.md"
        )
    return plugin
