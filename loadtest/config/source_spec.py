"""One ``[[sources]]`` table, validated: the spec every prompt source plugin loads from."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from loadtest.config.workload_tables import WorkloadKeys

__all__ = ["SourceSpec"]


@dataclass(frozen=True, slots=True)
class SourceSpec:
    """One prompt source with its weight and category."""

    kind: str
    category: str
    weight: float = 1.0
    max_tokens: int | None = None
    path: Path | None = None
    subsets: tuple[str, ...] = ()
    languages: tuple[str, ...] = ()
    exclude_languages: tuple[str, ...] = ()
    min_prompt_chars: int = 1
    max_prompt_chars: int = 1_000_000
    limit: int | None = None
    prompts: tuple[str, ...] = ()
    workload: WorkloadKeys = field(default_factory=WorkloadKeys)
    """Token lengths, trace replay and conversation keys (synthetic/trace/conversations)."""
    options: tuple[tuple[str, object], ...] = ()
    """A plugin kind's own keys (those no field above holds), as written, sorted."""

    def option(self, key: str, default: object = None) -> object:
        """A plugin kind's own key, or ``default``."""
        return dict(self.options).get(key, default)
