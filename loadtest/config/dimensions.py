"""Sweep dimensions as plugins: what one step of a sweep or a search changes in a run.

``loadtest sweep --sweep NAME=V,V,...``, ``sweep --search NAME=LO..HI`` and ``ab``'s
``--sweep``/``--search`` run the scenario once per value of a dimension registered under
``NAME`` in the entry-point group ``loadtest.dimensions``; loadtest's own ``concurrency``
and ``rate`` are registered exactly as a third party's. A dimension declares whether its
steps are whole numbers, whether a step offers an open loop (a search there ends a point
that saturates instead of letting its queue grow), and ``apply``: the scenario a step
runs, from the scenario with every flag applied. ``apply`` is called in the process that
plans the run, before it is split over workers or Ray tasks, so each of them runs the
step's scenario.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from loadtest.errors import UsageError
from loadtest.registry import Registry

if TYPE_CHECKING:
    from loadtest.config.scenario import LoadSpec, Scenario

__all__ = [
    "CONCURRENCY",
    "DIMENSIONS",
    "RATE",
    "SweepDimension",
    "closed_at",
    "known_dimensions",
    "open_at",
    "parse_values",
]


@runtime_checkable
class SweepDimension(Protocol):
    """What a sweep dimension declares (an object, registered by its name)."""

    @property
    def whole(self) -> bool:
        """True: every step is a whole number (a concurrency, a token count)."""
        ...

    @property
    def open_loop(self) -> bool:
        """True: a step offers arrivals at a rate, whatever the endpoint does with them."""
        ...

    def apply(self, scenario: Scenario, value: float) -> Scenario:
        """The scenario one step runs at ``value``; ``UsageError`` for a value it cannot
        take (its message names the dimension and the value)."""
        ...


DIMENSIONS: Registry[SweepDimension] = Registry(
    "loadtest.dimensions", "sweep dimension", protocol=SweepDimension, error=UsageError
)


def closed_at(load: LoadSpec, concurrency: int) -> LoadSpec:
    """A closed loop of ``concurrency`` sessions (``--concurrency`` and the dimension)."""
    if concurrency < 1:
        raise UsageError(f"concurrency must be at least 1, got {concurrency}")
    return dataclasses.replace(load, mode="closed", concurrency=concurrency, arrival=())


def open_at(load: LoadSpec, rate: float) -> LoadSpec:
    """An open loop at ``rate`` arrivals a second (``--rate`` and the dimension): the
    scenario's arrival process if it has one, Poisson otherwise; its concurrency stays
    as the loop's in-flight cap (as documented)."""
    if not rate > 0 or not math.isfinite(rate):
        raise UsageError(f"rate must be a positive number, got {rate:g}")
    return dataclasses.replace(
        load, mode=load.mode if load.mode != "closed" else "poisson", rate=rate
    )


class _Concurrency:
    """``concurrency``: a closed loop of N sessions a step."""

    whole = True
    open_loop = False

    def apply(self, scenario: Scenario, value: float) -> Scenario:
        return dataclasses.replace(scenario, load=closed_at(scenario.load, int(value)))


class _Rate:
    """``rate``: an open loop of N arrivals a second a step."""

    whole = False
    open_loop = True

    def apply(self, scenario: Scenario, value: float) -> Scenario:
        return dataclasses.replace(scenario, load=open_at(scenario.load, value))


CONCURRENCY = _Concurrency()
RATE = _Rate()


def parse_values(text: str, where: str, whole: bool) -> tuple[float, ...]:
    """``1,2,4,8`` into increasing positive numbers (whole ones where ``whole``);
    ``UsageError`` that starts with ``where`` (the flag as given) and names the bad item."""
    steps = []
    for part in text.split(","):
        item = part.strip()
        try:
            v = float(item)
        except ValueError:
            raise UsageError(f"{where}: {item!r} is not a number") from None
        if not v > 0 or not math.isfinite(v):
            raise UsageError(f"{where}: every step must be a positive number, not {item!r}")
        if whole and v != int(v):
            raise UsageError(f"{where}: {item!r} is not a whole number")
        steps.append(v)
    if sorted(steps) != steps or len(set(steps)) != len(steps):
        raise UsageError(f"{where}: steps must increase")
    return tuple(steps)


def known_dimensions() -> dict[str, bool]:
    """Each registered dimension's name and whether its steps are whole numbers."""
    return {name: DIMENSIONS.load(name).whole for name in DIMENSIONS.names()}
