"""An arrival process plugin: ``mode = "pulses"``, ``pulse`` requests at once, at even gaps.

A pulse of ``pulse`` arrivals every ``pulse / rate`` seconds keeps the mean rate and
makes the bursts an agent fleet makes when every agent wakes on the same tick. It
declares its own ``[load]`` key with its default, what makes a value wrong, and its send
times; it says nothing about workers (each keeps its share of the whole plan).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping

Param = float | int | str | bool


class Pulses:
    keys: Mapping[str, Param] = {"pulse": 4}

    def problem(self, params: Mapping[str, Param]) -> tuple[str, str] | None:
        pulse = params.get("pulse", 4)
        if not isinstance(pulse, int) or isinstance(pulse, bool) or pulse < 1:
            return "pulse", f"a pulse is 1 or more arrivals, got {pulse!r}"
        return None

    def offsets_ns(
        self, rate: float, params: Mapping[str, Param], rng: random.Random
    ) -> Iterator[int]:
        pulse = int(params.get("pulse", 4))
        gap = pulse * 1e9 / rate
        n = 0
        while True:
            yield round((n // pulse) * gap)
            n += 1


PULSES = Pulses()
