"""The simulated model's think segment: how long it reasons, and how it says so.

A reasoning model streams a think block before its answer. The simulator draws that
block up front like the rest of the plan (``plan_response``), from a random stream of
its own (seed + 3), so the answer of a request is the same with reasoning on or off.
The segment is the plan's first ``reasoning_pieces`` pieces; every timing model (plain,
lockstep, speculative) then times them as any other, and the writers frame them by
``reasoning_format``:

- ``vllm``: ``delta.reasoning`` and the older ``delta.reasoning_content`` in the same
  delta, as vLLM sent them while it renamed the field;
- ``reasoning``: ``delta.reasoning`` alone (vLLM after the rename);
- ``llama``: ``delta.reasoning_content`` (llama.cpp's ``--reasoning-format``);
- ``think-tags``: the raw ``<think>...</think>`` inside ``delta.content``, as a server
  without a reasoning parser streams it; each tag comes in two pieces, cut inside the
  tag, as a tokenizer without think tokens splits it.

The Responses API always gets a reasoning item and its events
(``response.reasoning_text.delta``), whatever the format: its reasoning is typed.

A request's reasoning controls move the segment as a reasoning model's would
(``effort_scale``): ``reasoning_effort`` (chat) or ``reasoning.effort`` (Responses API)
scales its mean length (``none`` 0, ``minimal`` 0.25, ``low`` 0.5, ``medium`` 1,
``high`` 2), and ``chat_template_kwargs.enable_thinking = false`` (vLLM's, for Qwen 3
and the like) turns it off.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from loadtest.errors import UsageError
from loadtest.sim.arguments import WORDS

__all__ = [
    "FORMATS",
    "USAGE_MODES",
    "ReasoningSettings",
    "ThinkPlan",
    "check_reasoning",
    "effort_scale",
    "plan_think",
]

FORMATS = ("vllm", "reasoning", "llama", "think-tags")
USAGE_MODES = ("sent", "none", "wrong")
OPEN_TAG = ("<thi", "nk>\n")
CLOSE_TAG = ("\n</thi", "nk>\n\n")
"""Each tag as two pieces cut inside it: a client must join pieces to find it."""


EFFORT_SCALE = {"none": 0.0, "minimal": 0.25, "low": 0.5, "medium": 1.0, "high": 2.0}
"""How much a reasoning effort scales the segment's mean length (unknown efforts: 1)."""


def effort_scale(request: Mapping[str, object]) -> float:
    """The request's reasoning controls as a factor on the mean think length."""
    kwargs = request.get("chat_template_kwargs")
    if isinstance(kwargs, Mapping) and kwargs.get("enable_thinking") is False:
        return 0.0
    effort = request.get("reasoning_effort")
    reasoning = request.get("reasoning")
    if effort is None and isinstance(reasoning, Mapping):
        effort = reasoning.get("effort")
    return EFFORT_SCALE.get(effort, 1.0) if isinstance(effort, str) else 1.0


class ReasoningSettings(Protocol):
    """The settings of ``SimConfig`` that shape the think segment."""

    @property
    def reasoning_tokens(self) -> int: ...
    @property
    def reasoning_sigma(self) -> float: ...
    @property
    def reasoning_format(self) -> str: ...
    @property
    def reasoning_usage(self) -> str: ...
    @property
    def accept_reasoning(self) -> float: ...
    @property
    def itl_ms(self) -> float: ...
    @property
    def itl_sigma(self) -> float: ...


@dataclass(frozen=True, slots=True)
class ThinkPlan:
    """The think segment of one response: its pieces and the gaps after each."""

    pieces: tuple[str, ...]
    gaps_ms: tuple[float, ...]
    """The gap after each piece (the last one's leads to the answer's first piece)."""
    reported: int | None
    """``usage.completion_tokens_details.reasoning_tokens`` to send (None: leave out)."""


def check_reasoning(cfg: ReasoningSettings) -> None:
    """Raise ``UsageError`` naming the first reasoning setting out of range."""
    reasoning_tokens, fmt = cfg.reasoning_tokens, cfg.reasoning_format
    usage, accept = cfg.reasoning_usage, cfg.accept_reasoning
    if reasoning_tokens < 0:
        raise UsageError(f"sim reasoning_tokens must not be negative, not {reasoning_tokens}")
    if fmt not in FORMATS:
        raise UsageError(f"sim reasoning_format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if usage not in USAGE_MODES:
        modes = ", ".join(USAGE_MODES)
        raise UsageError(f"sim reasoning_usage must be one of {modes}, not {usage!r}")
    if not 0.0 <= accept <= 1.0:
        raise UsageError(f"sim accept_reasoning must be between 0 and 1, not {accept}")


def plan_think(
    rng: random.Random, cfg: ReasoningSettings, room: int, scale: float = 1.0
) -> ThinkPlan:
    """Draw one think segment of about ``reasoning_tokens`` x ``scale`` (log-normal), at
    most ``room`` pieces, each gap drawn as the answer's are (``itl_ms``, ``itl_sigma``)."""
    tags = cfg.reasoning_format == "think-tags"
    mean_tokens, sigma = cfg.reasoning_tokens * scale, cfg.reasoning_sigma
    drawn = mean_tokens * math.exp(rng.gauss(0.0, sigma)) if sigma > 0 else mean_tokens
    words = max(1, min(round(drawn), room - (4 if tags else 0)))
    body = [("" if i == 0 else " ") + WORDS[rng.randrange(len(WORDS))] for i in range(words)]
    pieces = (*OPEN_TAG, *body, *CLOSE_TAG) if tags else tuple(body)
    median, spread = cfg.itl_ms, cfg.itl_sigma
    gaps = tuple(
        median * math.exp(rng.gauss(0.0, spread)) if spread > 0 else median for _ in pieces
    )
    # A server without a reasoning parser knows of no reasoning to count.
    reported = None if tags or cfg.reasoning_usage == "none" else len(pieces)
    if reported is not None and cfg.reasoning_usage == "wrong":
        reported //= 2  # a deliberate miscount, so that the client's flag can be seen
    return ThinkPlan(pieces=pieces, gaps_ms=gaps, reported=reported)
