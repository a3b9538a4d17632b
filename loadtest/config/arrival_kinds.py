"""loadtest's own arrival processes, registered in ``loadtest.arrivals`` (pyproject.toml)
exactly as a plugin package registers its (``config/arrivals.py``, docs/plugins.md)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Mapping

from loadtest.config.arrivals import Param

__all__ = ["CONSTANT", "GAMMA", "POISSON"]


class _NoKeys:
    """A process with no keys of its own."""

    keys: Mapping[str, Param] = {}

    def problem(self, params: Mapping[str, Param]) -> tuple[str, str] | None:
        return None


class Constant(_NoKeys):
    """One arrival every ``1/rate`` seconds exactly."""

    def offsets_ns(
        self, rate: float, params: Mapping[str, Param], rng: random.Random
    ) -> Iterator[int]:
        gap = 1e9 / rate
        n = 0
        while True:
            yield round(n * gap)
            n += 1


def _gamma_offsets(rate: float, shape: float, rng: random.Random) -> Iterator[int]:
    scale = 1e9 / rate / shape
    t = 0.0
    while True:
        yield round(t)
        t += rng.gammavariate(shape, scale)


class Poisson(_NoKeys):
    """Exponential gaps at a mean of ``1/rate``: independent arrivals."""

    def offsets_ns(
        self, rate: float, params: Mapping[str, Param], rng: random.Random
    ) -> Iterator[int]:
        return _gamma_offsets(rate, 1.0, rng)


class Gamma:
    """Gamma-distributed gaps; ``burstiness`` is the shape's inverse: 1 is Poisson,
    above 1 burstier, below 1 more regular (vLLM's ``--burstiness``, inverted so that
    the word means what it says)."""

    keys: Mapping[str, Param] = {"burstiness": 1.0}

    def problem(self, params: Mapping[str, Param]) -> tuple[str, str] | None:
        b = params.get("burstiness", 1.0)
        if (
            not isinstance(b, float | int)
            or isinstance(b, bool)
            or not (math.isfinite(b) and b > 0)
        ):
            return "burstiness", f"expected a positive number, got {b!r}"
        return None

    def offsets_ns(
        self, rate: float, params: Mapping[str, Param], rng: random.Random
    ) -> Iterator[int]:
        return _gamma_offsets(rate, 1.0 / float(params.get("burstiness", 1.0)), rng)


CONSTANT = Constant()
POISSON = Poisson()
GAMMA = Gamma()
