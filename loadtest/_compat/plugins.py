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

__all__ = ["group_entry_points"]

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
    installed metadata costs ~12 ms with 215 distributions, and was made per source."""
    checkout = _checkout_entry_points()
    found = tuple(entry_points(group=group))
    if checkout is None:
        return found
    own = tuple(EntryPoint(n, v, group) for n, v in checkout.get(group, {}).items())
    others = tuple(ep for ep in found if ep.dist is None or ep.dist.name != _PROJECT)
    return own + others
