"""Open-loop arrival processes as plugins: one object per mode, found by its name.

An arrival process declares, in one place, the ``[load]`` keys it takes beyond those
every open loop has (``rate``, ``concurrency``, ``rate_ceiling``, ...) with their
defaults, what makes one of their values wrong, and the intended send times it makes.
loadtest's own (``constant``, ``poisson``, ``gamma``: ``config/arrival_kinds.py``) are
registered as a third party's are, as entry points in the group ``loadtest.arrivals``.

Scaling out asks nothing of a process: every worker draws the whole sequence from the
run's seed and keeps every N-th arrival (``engine.schedule.arrival_offsets_ns``), so the
arrivals of N workers together are those of one process, whatever the process (exactly
for a duration bound; docs/scale-out.md says where a request count differs).
The plugin objects load on first use (``_compat.plugins``); this layer imports none.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Protocol, runtime_checkable

from loadtest.config.toml_tables import Table
from loadtest.errors import UsageError
from loadtest.registry import Registry

__all__ = [
    "ARRIVALS",
    "GROUP",
    "RESERVED",
    "TRACE_MODE",
    "ArrivalProcess",
    "Param",
    "arrival_modes",
    "arrival_process",
    "read_params",
]

GROUP = "loadtest.arrivals"
"""The entry-point group arrival processes register in, by mode name."""
TRACE_MODE = "trace"
"""The mode a trace source sets (its recorded send times): not a plugin, not for TOML."""

Param = float | int | str | bool
"""A value of an arrival process's own key."""


@runtime_checkable
class ArrivalProcess(Protocol):
    """What an arrival process declares (an object, registered by its mode's name)."""

    @property
    def keys(self) -> Mapping[str, Param]:
        """Its own ``[load]`` keys and their defaults (the default's type is the key's)."""
        ...

    def problem(self, params: Mapping[str, Param]) -> tuple[str, str] | None:
        """``(key, what is wrong)`` with these values of its keys, or None."""
        ...

    def offsets_ns(
        self, rate: float, params: Mapping[str, Param], rng: random.Random
    ) -> Iterator[int]:
        """Intended send times in ns from the start, the first at 0, in order, forever,
        at a mean of ``rate`` a second; ``rng`` is the run's, seeded."""
        ...


RESERVED = ("closed", TRACE_MODE)
"""Modes that are no arrival process: a plugin registered under one is not offered."""


ARRIVALS: Registry[ArrivalProcess] = Registry(
    GROUP,
    "arrival process",
    protocol=ArrivalProcess,
    error=UsageError,
    reserved=frozenset(RESERVED),
)


def arrival_modes() -> tuple[str, ...]:
    """The names of every registered process (loadtest's and installed plugins')."""
    return ARRIVALS.names()


def arrival_process(mode: str) -> ArrivalProcess:
    """The process registered as ``mode``; ``UsageError`` when none is, or it is no
    ``ArrivalProcess`` (each member it lacks named)."""
    if mode in RESERVED:
        raise UsageError(f"{mode!r} is no arrival process (known: {', '.join(arrival_modes())})")
    return ARRIVALS.load(mode)


def read_params(t: Table, mode: str) -> tuple[tuple[str, Param], ...]:
    """The values of ``mode``'s own keys in the ``[load]`` table ``t`` (defaults where
    absent), checked by the process; errors name the file, the table and the key."""
    try:
        process = arrival_process(mode)
    except UsageError as exc:
        raise t.fail("mode", str(exc)) from exc
    params: dict[str, Param] = {}
    for key, default in sorted(process.keys.items()):
        if isinstance(default, bool):
            params[key] = bool(t.get(key, bool, default, "true or false"))
        elif isinstance(default, int):
            params[key] = int(t.get(key, int, default, "an integer"))
        elif isinstance(default, float):
            params[key] = float(t.get(key, (int, float), default, "a number"))
        else:
            params[key] = str(t.get(key, str, default, "a string"))
    if (wrong := process.problem(params)) is not None:
        raise t.fail(*wrong)
    return tuple(params.items())
