"""The typed keys of loadtest's workload source kinds, one class each, with its parser.

Each kind declares its keys here and nowhere else: a ``BuiltinSource`` takes the class,
its table keys are the class's fields, and ``SourceSpec.own`` hands them back typed.

A length is an integer (fixed) or a table ``{dist, mean, std, min, max}``; drawn values
are always clamped to ``[min, max]`` so a long tail never asks for more than a model
takes.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path

from loadtest.config.toml_tables import Table

__all__ = [
    "DISTRIBUTIONS",
    "AgentTraceKeys",
    "ConversationKeys",
    "LengthSpec",
    "SyntheticKeys",
    "TraceKeys",
    "own_key_names",
    "parse_length",
]

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


def own_key_names(keys_type: type) -> frozenset[str]:
    """The table keys a kind's typed keys hold: its dataclass's fields, by name (none
    for a value that is no dataclass)."""
    return frozenset(f.name for f in fields(keys_type)) if is_dataclass(keys_type) else frozenset()


def _tokenizer(t: Table, base: Path) -> Path | None:
    tok = t.get("tokenizer", str, None, "a path to a tokenizer.json")
    return None if tok is None else (Path(tok) if Path(tok).is_absolute() else base / tok)


@dataclass(frozen=True, slots=True)
class SyntheticKeys:
    """A ``synthetic`` source's keys: prompts cut to token lengths from a corpus."""

    input_tokens: LengthSpec
    output_tokens: LengthSpec | None = None
    prefix_tokens: int = 0
    """Tokens every prompt of the source starts with (a prefix-cache workload)."""
    tokenizer: Path | None = None
    """A local ``tokenizer.json`` (else the endpoint's ``/tokenize``)."""

    @classmethod
    def parse(cls, t: Table, base: Path) -> SyntheticKeys:
        """The keys of one ``kind = "synthetic"`` table."""
        length = parse_length(t, "input_tokens")
        if length is None:
            raise t.fail("input_tokens", "a synthetic source needs input_tokens")
        keys = cls(
            input_tokens=length,
            output_tokens=parse_length(t, "output_tokens"),
            prefix_tokens=t.integer("prefix_tokens", 0) or 0,
            tokenizer=_tokenizer(t, base),
        )
        if keys.prefix_tokens >= length.min:
            raise t.fail(
                "prefix_tokens",
                f"the shared prefix ({keys.prefix_tokens}) must be shorter than the "
                f"shortest input ({length.min})",
            )
        return keys


@dataclass(frozen=True, slots=True)
class TraceKeys:
    """A ``trace`` source's keys: each line sent at its recorded time."""

    speedup: float = 1.0
    """Time runs this many times faster than recorded."""
    block_size: int = 512
    """Tokens per ``hash_ids`` block (Mooncake's is 512)."""
    tokenizer: Path | None = None

    @classmethod
    def parse(cls, t: Table, base: Path) -> TraceKeys:
        """The keys of one ``kind = "trace"`` table."""
        return cls(
            speedup=t.number("speedup", 1.0, strict=True) or 1.0,
            block_size=t.integer("block_size", 512, minimum=1) or 512,
            tokenizer=_tokenizer(t, base),
        )


@dataclass(frozen=True, slots=True)
class ConversationKeys:
    """A ``conversations`` source's keys: each conversation's turns in order."""

    max_turns: int | None = None
    think_time_ms: float = 0.0
    """The pause between an answer and the next user turn."""
    answers: str = "server"
    """The history carries the server's answers, or the recorded ones."""

    @classmethod
    def parse(cls, t: Table, base: Path) -> ConversationKeys:
        """The keys of one ``kind = "conversations"`` table."""
        return cls(
            max_turns=t.integer("max_turns", None, minimum=1),
            think_time_ms=t.number("think_time_ms", 0.0) or 0.0,
            answers=t.choice("answers", "server", ANSWER_MODES),
        )


@dataclass(frozen=True, slots=True)
class AgentTraceKeys:
    """An ``agent-trace`` source's keys: recorded agent sessions."""

    speedup: float = 1.0
    starts: str = "recorded"
    """Sessions start at their recorded offsets, or ``closed``: as many at once as
    ``[load] concurrency``, the next when one ends."""
    tokenizer: Path | None = None

    @classmethod
    def parse(cls, t: Table, base: Path) -> AgentTraceKeys:
        """The keys of one ``kind = "agent-trace"`` table."""
        return cls(
            speedup=t.number("speedup", 1.0, strict=True) or 1.0,
            starts=t.choice("starts", "recorded", SESSION_STARTS),
            tokenizer=_tokenizer(t, base),
        )
