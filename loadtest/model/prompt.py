"""The prompt record every source produces: one request's input and what judges its output.

It is a model type (the transport builds payloads from it, the engine accounts it, the
data sets produce it), so it lives below all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loadtest.model.json import JsonObject

__all__ = ["Prompt"]


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
