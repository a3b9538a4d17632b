"""The prompt record every source produces, and the weighted pool the runner draws from."""

from __future__ import annotations

import bisect
import random
from dataclasses import dataclass
from typing import Any

from loadtest.model.json import JsonObject

__all__ = ["Prompt", "PromptPool"]


@dataclass(frozen=True, slots=True)
class Prompt:
    """One request's worth of input, with what is needed to judge the output."""

    id: str
    source: str
    category: str
    messages: tuple[dict[str, Any], ...]
    text: str | None = None
    """Raw prompt for the completions API where the source has one (HumanEval)."""
    tools: tuple[dict[str, Any], ...] = ()
    """OpenAI ``tools`` sent with the request."""
    expected_calls: tuple[dict[str, Any], ...] | None = None
    """BFCL ground truth: ``[{function_name: {arg: [allowed values]}}]``."""
    name_map: tuple[tuple[str, str], ...] = ()
    """Sent tool name -> original name, where a name had to be made API-safe."""
    max_tokens: int | None = None
    language: str | None = None
    sampling: JsonObject | None = None
    """Body fields of this prompt's requests over the scenario's ``sampling`` (a fixed
    output length: ``ignore_eos``, ``min_tokens``)."""
    input_tokens: int | None = None
    """The prompt's exact length in tokens, where a source cut it to one."""

    @property
    def chars(self) -> int:
        """Characters of prompt text, a cheap stand-in for its length."""
        if self.text is not None:
            return len(self.text)
        return sum(len(str(m.get("content") or "")) for m in self.messages)


class PromptPool:
    """Draws prompts: a source by weight, then a prompt of that source, seeded."""

    def __init__(self, groups: list[tuple[float, list[Prompt]]], seed: int) -> None:
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
