"""One ``[[sources]]`` table, validated: the spec every prompt source plugin loads from."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from loadtest.errors import DatasetError

__all__ = ["SourceSpec"]

K = TypeVar("K")


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
    own_keys: object = None
    """The kind's own keys, typed, as its ``parse_keys`` made them (``SyntheticKeys`` for
    ``synthetic``); None for a kind without one. Read them with ``own``."""
    options: tuple[tuple[str, object], ...] = ()
    """A kind's keys that neither a field above nor its typed keys hold, as written,
    sorted."""

    def own(self, keys_type: type[K]) -> K:
        """The kind's typed keys as ``keys_type``: ``DatasetError`` if they are not (a
        kind that reads keys its table parser did not make)."""
        if not isinstance(self.own_keys, keys_type):
            raise DatasetError(
                f"source {self.category!r} ({self.kind}) has no {keys_type.__name__} keys"
            )
        return self.own_keys

    def option(self, key: str, default: object = None) -> object:
        """A plugin kind's own key, or ``default``."""
        return dict(self.options).get(key, default)
