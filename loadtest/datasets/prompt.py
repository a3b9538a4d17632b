"""The weighted pool the runner draws prompts from (``Prompt`` itself is in the model)."""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence

from loadtest.model.prompt import Prompt

__all__ = ["Prompt", "PromptPool"]


class PromptPool:
    """Draws prompts: a source by weight, then a prompt of that source, seeded."""

    def __init__(self, groups: Sequence[tuple[float, Sequence[Prompt]]], seed: int) -> None:
        groups = [(w, ps) for w, ps in groups if ps]
        if not groups:
            raise ValueError("no prompts to draw from")
        self._groups = [ps for _, ps in groups]
        total = 0.0
        self._cum: list[float] = []
        for w, _ in groups:
            total += w
            self._cum.append(total)
        self._total = total
        self._rng = random.Random(seed)

    def draw(self) -> Prompt:
        """The next prompt of the seeded sequence."""
        g = bisect.bisect_right(self._cum, self._rng.random() * self._total)
        group = self._groups[min(g, len(self._groups) - 1)]
        return group[self._rng.randrange(len(group))]

    def prompts(self) -> list[Prompt]:
        """Every prompt of every source."""
        return [p for g in self._groups for p in g]

    @property
    def size(self) -> int:
        """Number of distinct prompts across all sources."""
        return sum(len(g) for g in self._groups)
