"""One registry for every extension point: plugins by entry-point group, checked on load.

loadtest's own prompt sources, arrivals, workloads, fault kinds, tables, outputs and
summary blocks register exactly as a third party's do (its pyproject.toml; a checkout's
own from that file, ``_compat.plugins``). Each extension point is one ``Registry``: it
lists the names, loads one on first use, and checks what it loaded against the point's
protocol, member by member and signature by signature (pluggy's ``_verify_hook`` is the
model), so a wrong plugin fails at start naming itself and the mismatch instead of deep
in a run. ``LOADTEST_DISABLE_PLUGINS`` turns plugins off by name; ``loadtest plugins``
lists every registry's plugins with where each comes from and whether it loaded.
"""

from __future__ import annotations

import inspect
import os
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar, cast

from loadtest._compat.plugins import PluginLoadError, group_entry_points

__all__ = [
    "DISABLE_ENV",
    "PluginInfo",
    "Registry",
    "disabled_plugins",
    "mismatches",
    "registries",
]

T = TypeVar("T")

DISABLE_ENV = "LOADTEST_DISABLE_PLUGINS"
"""Comma-separated plugins to turn off: ``pause`` (in every group) or ``faults:pause``
(the group's short name, or its whole ``loadtest.faults``)."""

_ALL: dict[str, Registry[object]] = {}

PluginState = Literal["loaded", "disabled", "failed"]


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """One registered plugin as ``loadtest plugins`` lists it."""

    group: str
    name: str
    value: str
    """Where it lives: ``module:attribute``."""
    source: str
    """The distribution that registers it, with its version (``loadtest 0.1.0``)."""
    state: PluginState
    why: str = ""
    """Disabled or failed: the reason, as the error a run would give."""


def disabled_plugins(group: str) -> frozenset[str]:
    """The names ``LOADTEST_DISABLE_PLUGINS`` turns off in ``group``."""
    short = group.removeprefix("loadtest.")
    off = set()
    for item in os.environ.get(DISABLE_ENV, "").split(","):
        where, _, name = item.strip().rpartition(":")
        if name and where in ("", short, group):
            off.add(name)
    return frozenset(off)


def registries() -> dict[str, Registry[object]]:
    """Every registry made so far, by group (``loadtest plugins`` imports their modules)."""
    return dict(_ALL)


class Registry(Generic[T]):
    """The plugins of one entry-point group, each loaded once and checked.

    ``protocol``: the runtime-checkable protocol every plugin must meet (None: checked
    by ``check`` alone); ``check``: a further test, a reason for a mismatch or None;
    ``error``: the exception of the calling layer (a message naming the plugin);
    ``reserved``: names that are not plugins of this point (an arrival mode "closed").
    """

    def __init__(
        self,
        group: str,
        what: str,
        *,
        protocol: type | None = None,
        check: Callable[[object], str | None] | None = None,
        error: Callable[[str], Exception] = PluginLoadError,
        reserved: frozenset[str] = frozenset(),
    ) -> None:
        self.group = group
        self.what = what
        self._protocol = protocol
        self._check = check
        self._error = error
        self._reserved = reserved
        self._loaded: dict[str, T] = {}
        _ALL[group] = cast("Registry[object]", self)

    def names(self) -> tuple[str, ...]:
        """The enabled names, sorted (installed metadata has no order of ours)."""
        off = disabled_plugins(self.group) | self._reserved
        return tuple(sorted({ep.name for ep in group_entry_points(self.group)} - off))

    def __contains__(self, name: object) -> bool:
        return name in self.names()

    def turned_off(self, name: str) -> str | None:
        """Why ``name`` is not offered although installed (``LOADTEST_DISABLE_PLUGINS``)."""
        if name in disabled_plugins(self.group):
            return f"the {self.what} {name!r} is turned off ({DISABLE_ENV})"
        return None

    def load(self, name: str) -> T:
        """The plugin registered as ``name``: ``error`` when none is, it is turned off,
        it cannot be imported, or it does not meet the protocol (each member named)."""
        off = self.turned_off(name)
        if off:  # before the cache: a setting of now
            raise self._error(off)
        if name in self._loaded:
            return self._loaded[name]
        found = [ep for ep in group_entry_points(self.group) if ep.name == name]
        if not found or name in self._reserved:
            known = ", ".join(self.names()) or "none"
            raise self._error(f"no {self.what} {name!r} is installed (known: {known})")
        try:
            plugin = found[0].load()
        except (ImportError, AttributeError) as exc:
            raise self._error(
                f"the {self.what} plugin {found[0].value!r} ({name}) could not be loaded: {exc}"
            ) from exc
        wrong = self._mismatch(plugin)
        if wrong:
            raise self._error(
                f"the {self.what} plugin {found[0].value!r} ({name}) {wrong}: see docs/plugins.md"
            )
        self._loaded[name] = cast(T, plugin)
        return self._loaded[name]

    def _mismatch(self, plugin: object) -> str | None:
        if self._protocol is not None:
            wrong = mismatches(plugin, self._protocol)
            if wrong:
                return "does not fit: " + "; ".join(wrong)
        return None if self._check is None else self._check(plugin)

    def info(self) -> Iterator[PluginInfo]:
        """Each registered plugin, loaded (or not) as a run would load it."""
        off = disabled_plugins(self.group)
        for ep in sorted(group_entry_points(self.group), key=lambda e: e.name):
            if ep.name in self._reserved:
                continue
            dist = ep.dist
            source = f"{dist.name} {dist.version}" if dist is not None else "loadtest (checkout)"
            state: PluginState = "loaded"
            why = ""
            if ep.name in off:
                state, why = "disabled", DISABLE_ENV
            else:
                try:
                    self.load(ep.name)
                except Exception as exc:
                    state, why = "failed", str(exc)
            yield PluginInfo(self.group, ep.name, ep.value, source, state, why)


def mismatches(plugin: object, protocol: type) -> list[str]:
    """What ``plugin`` lacks of ``protocol``: a missing member, or a method that cannot
    be called as the protocol calls it (too few parameters, or more that are required).
    Parameter names are not compared: loadtest passes the protocol's arguments by
    position, as a plugin's own names for them are its business."""
    wrong = []
    for member in sorted(_protocol_members(protocol)):
        want = inspect.getattr_static(protocol, member, None)
        if not hasattr(plugin, member):
            wrong.append(f"no {member}")
            continue
        if not inspect.isfunction(want):
            continue  # a property or an attribute: being there is all
        got = getattr(plugin, member)
        if not callable(got):
            wrong.append(f"{member} is not callable")
            continue
        need = _positional(inspect.signature(want)) - 1  # the protocol's, less self
        try:
            have = inspect.signature(got)
        except (TypeError, ValueError):
            continue  # a builtin without a signature: taken on trust
        problem = _takes(have, need)
        if problem:
            shown = ", ".join(have.parameters)
            wrong.append(f"{member}({shown}) {problem} (the protocol passes {need})")
    return wrong


def _protocol_members(protocol: type) -> set[str]:
    attrs: Callable[[type], set[str]] = getattr(typing, "_get_protocol_attrs")  # noqa: B009
    return attrs(protocol)


def _positional(sig: inspect.Signature) -> int:
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(1 for p in sig.parameters.values() if p.kind in kinds)


def _takes(sig: inspect.Signature, n: int) -> str | None:
    """Why a callable with ``sig`` cannot take ``n`` positional arguments, or None."""
    params = list(sig.parameters.values())
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        room = n
    else:
        room = _positional(sig)
    required = sum(
        1
        for p in params
        if p.default is inspect.Parameter.empty
        and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    )
    if room < n:
        return f"takes {room} arguments"
    if required > n:
        return f"requires {required} arguments"
    return None
