"""The workload keys of prompt sources: token lengths, trace replay, conversations.

A length is an integer (fixed) or a table ``{dist, mean, std, min, max}``; drawn values
are always clamped to ``[min, max]`` so a long tail never asks for more than a model
takes.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from pathlib import Path

from loadtest.config.toml_tables import Table

__all__ = ["DISTRIBUTIONS", "LengthSpec", "WorkloadKeys", "parse_length", "parse_workload_keys"]

DISTRIBUTIONS = ("fixed", "uniform", "normal", "lognormal")
ANSWER_MODES = ("server", "recorded")
SESSION_STARTS = ("recorded", "closed")


@dataclass(frozen=True, slots=True)
class LengthSpec:
    """A length in tokens: fixed, or drawn from a bounded distribution.

    ``uniform`` draws in ``[min, max]``; ``normal`` has ``mean`` and ``std``;
    ``lognormal`` has median ``mean`` and log-space sigma ``std``.
    """

    dist: str
    mean: float
    std: float = 0.0
    min: int = 1
    max: int = 1_000_000

    @property
    def fixed(self) -> bool:
        """True when every draw gives the same length."""
        return self.dist == "fixed" or self.min == self.max

    def draw(self, rng: random.Random) -> int:
        """One length, clamped to the bounds."""
        if self.dist == "fixed":
            v = self.mean
        elif self.dist == "uniform":
            return rng.randint(self.min, self.max)
        elif self.dist == "normal":
            v = rng.gauss(self.mean, self.std)
        else:
            v = self.mean * math.exp(rng.gauss(0.0, self.std))
        return max(self.min, min(self.max, round(v)))

    def describe(self) -> str:
        """For the plan: ``512`` or ``normal(mean 512, std 64) in [16, 1024]``."""
        if self.dist == "fixed":
            return f"{round(self.mean)}"
        if self.dist == "uniform":
            return f"uniform in [{self.min}, {self.max}]"
        return f"{self.dist}(mean {self.mean:g}, std {self.std:g}) in [{self.min}, {self.max}]"


def parse_length(t: Table, name: str) -> LengthSpec | None:
    """``name = 512`` or ``name = {dist = "normal", mean = 512, std = 64, max = 2048}``."""
    raw = t.get(name, (int, dict), None, "an integer or a {dist, mean, std, min, max} table")
    if raw is None:
        return None
    if isinstance(raw, int):
        if raw < 1:
            raise t.fail(name, f"expected a length >= 1, got {raw}")
        return LengthSpec("fixed", float(raw), 0.0, raw, raw)
    s = t.sub(name)
    dist = s.choice("dist", "fixed", DISTRIBUTIONS)
    lo = s.integer("min", 1, minimum=1)
    hi = s.integer("max", None, minimum=1)
    mean = s.number("mean", None, strict=True)
    std = s.number("std", 0.0)
    s.finish()
    assert lo is not None
    assert std is not None
    if dist == "uniform":
        if hi is None:
            raise s.fail("max", "a uniform length needs min and max")
        mean = (lo + hi) / 2
    elif mean is None:
        raise s.fail("mean", f"a {dist} length needs a mean")
    if hi is None:
        hi = max(lo, math.ceil(mean * 4))  # a bound always: the tail must not run away
    if hi < lo:
        raise s.fail("max", f"max ({hi}) is below min ({lo})")
    if dist == "fixed":
        lo = hi = round(mean)
    return LengthSpec(dist, mean, std, lo, hi)


@dataclass(frozen=True, slots=True)
class WorkloadKeys:
    """The source keys of ``synthetic``, ``trace``, ``conversations`` and ``agent-trace``
    sources."""

    input_tokens: LengthSpec | None = None
    output_tokens: LengthSpec | None = None
    prefix_tokens: int = 0
    """Tokens every prompt of the source starts with (a prefix-cache workload)."""
    tokenizer: Path | None = None
    """A local ``tokenizer.json`` (else the endpoint's ``/tokenize``)."""
    speedup: float = 1.0
    """Trace replay: time runs this many times faster than recorded."""
    block_size: int = 512
    """Trace replay: tokens per ``hash_ids`` block (Mooncake's is 512)."""
    max_turns: int | None = None
    think_time_ms: float = 0.0
    """Conversations: the pause between an answer and the next user turn."""
    answers: str = "server"
    """Conversations: the history carries the server's answers, or the recorded ones."""
    starts: str = "recorded"
    """Agent traces: sessions start at their recorded offsets, or ``closed``: as many
    at once as ``[load] concurrency``, the next when one ends."""


WORKLOAD_KEYS: dict[str, frozenset[str]] = {
    "synthetic": frozenset(
        {"input_tokens", "output_tokens", "prefix_tokens", "tokenizer", "limit"}
    ),
    "trace": frozenset({"path", "speedup", "block_size", "tokenizer", "limit"}),
    "conversations": frozenset({"path", "max_turns", "think_time_ms", "answers", "limit"}),
    "agent-trace": frozenset({"path", "speedup", "starts", "tokenizer", "limit"}),
}
"""Keys each workload source kind accepts beyond the common ones."""


def parse_workload_keys(t: Table, kind: str, base: Path) -> WorkloadKeys:
    """The workload keys of one ``[[sources]]`` table (only its kind's are allowed)."""
    if kind not in WORKLOAD_KEYS:
        return WorkloadKeys()
    tok = t.get("tokenizer", str, None, "a path to a tokenizer.json")
    tok_path = None if tok is None else (Path(tok) if Path(tok).is_absolute() else base / tok)
    keys = WorkloadKeys(
        input_tokens=parse_length(t, "input_tokens"),
        output_tokens=parse_length(t, "output_tokens"),
        prefix_tokens=t.integer("prefix_tokens", 0) or 0,
        tokenizer=tok_path,
        speedup=t.number("speedup", 1.0, strict=True) or 1.0,
        block_size=t.integer("block_size", 512, minimum=1) or 512,
        max_turns=t.integer("max_turns", None, minimum=1),
        think_time_ms=t.number("think_time_ms", 0.0) or 0.0,
        answers=t.choice("answers", "server", ANSWER_MODES),
        starts=t.choice("starts", "recorded", SESSION_STARTS),
    )
    if kind == "synthetic":
        if keys.input_tokens is None:
            raise t.fail("input_tokens", "a synthetic source needs input_tokens")
        if keys.prefix_tokens >= keys.input_tokens.min:
            raise t.fail(
                "prefix_tokens",
                f"the shared prefix ({keys.prefix_tokens}) must be shorter than the "
                f"shortest input ({keys.input_tokens.min})",
            )
    return keys
