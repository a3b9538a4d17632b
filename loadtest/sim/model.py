"""The simulated model, without I/O: what to answer and when, drawn from a seeded RNG.

Everything about one response (time to first token, the gap before each token, the
tokens themselves, tool calls, injected errors) is decided up front from the request
body and the seed, so the same request always gets the same answer, and the server can
report the truth about when it meant to send each token.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from typing import Any

import orjson

__all__ = ["ResponsePlan", "SimConfig", "fake_arguments", "plan_response"]

_WORDS = [
    "the",
    "model",
    "answers",
    "with",
    "tokens",
    "that",
    "arrive",
    "one",
    "after",
    "another",
    "while",
    "the",
    "server",
    "keeps",
    "its",
    "slots",
    "busy",
    "and",
    "the",
    "client",
    "measures",
    "every",
    "gap",
    "between",
    "them",
    "so",
    "that",
    "a",
    "stall",
    "or",
    "a",
    "burst",
    "shows",
    "up",
    "in",
    "the",
    "histogram",
    "rather",
    "than",
    "hiding",
    "in",
    "an",
    "average",
    "value",
    "of",
    "latency",
]


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Distributions of the simulated endpoint (times in milliseconds)."""

    seed: int = 0
    ttft_ms: float = 20.0
    """Median time to first token for an empty prompt."""
    ttft_per_1k_tokens_ms: float = 15.0
    """Added prefill time per 1,000 prompt tokens (prompt tokens ~ characters / 4)."""
    ttft_sigma: float = 0.25
    """Log-normal spread of TTFT (0 = fixed)."""
    itl_ms: float = 8.0
    """Median gap between tokens."""
    itl_sigma: float = 0.3
    min_output_fraction: float = 0.5
    """Output length is drawn uniformly between this fraction of max_tokens and all of it."""
    invalid_tool_rate: float = 0.0
    """Share of tool-call responses whose arguments are broken JSON."""
    error_rate: float = 0.0
    """Share of requests answered with HTTP 500."""
    disconnect_rate: float = 0.0
    """Share of streams cut off half way (connection closed without [DONE])."""
    model: str = "sim-llm"
    max_batch: int = 64
    """Most chunks written in one write when tokens are due together."""


@dataclass(frozen=True, slots=True)
class ResponsePlan:
    """Everything the server will do for one request."""

    ttft_ns: int
    token_offsets_ns: tuple[int, ...]
    """Send time of each output piece, from when the request arrived."""
    pieces: tuple[str, ...]
    """Text of each streamed piece (tokens, or tool-call argument fragments)."""
    tool_name: str | None
    tool_arguments: str | None
    prompt_tokens: int
    fail_status: int | None
    disconnect_after: int | None
    """Close the stream after this many pieces (None = finish normally)."""

    @property
    def completion_tokens(self) -> int:
        """Tokens the response carries."""
        return len(self.pieces)


def _rng_for(seed: int, body: bytes) -> random.Random:
    digest = hashlib.blake2b(body, digest_size=8, key=seed.to_bytes(8, "little", signed=True))
    return random.Random(int.from_bytes(digest.digest(), "little"))


def _lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(rng.gauss(0.0, sigma)) if sigma > 0 else median


def plan_response(cfg: SimConfig, body: bytes, request: dict[str, Any]) -> ResponsePlan:
    """Decide the whole response to ``request`` (whose raw bytes are ``body``)."""
    rng = _rng_for(cfg.seed, body)
    prompt_chars = _prompt_chars(request)
    prompt_tokens = max(1, prompt_chars // 4)
    ttft_ms = _lognormal(rng, cfg.ttft_ms, cfg.ttft_sigma) + (
        cfg.ttft_per_1k_tokens_ms * prompt_tokens / 1000
    )
    fail = 500 if rng.random() < cfg.error_rate else None
    max_tokens = int(request.get("max_tokens") or request.get("max_completion_tokens") or 128)
    max_tokens = max(1, min(max_tokens, 32768))
    low = max(1, math.ceil(max_tokens * cfg.min_output_fraction))
    n = rng.randint(low, max_tokens)
    tool_name = None
    arguments = None
    tools = request.get("tools")
    if tools and isinstance(tools, list):
        fn = rng.choice(tools).get("function", {})
        tool_name = str(fn.get("name", "tool"))
        args = fake_arguments(fn.get("parameters") or {}, rng)
        arguments = orjson.dumps(args).decode()
        if rng.random() < cfg.invalid_tool_rate:
            arguments = arguments[: max(1, len(arguments) // 2)]  # cut: not JSON any more
        pieces = tuple(arguments[i : i + 4] for i in range(0, len(arguments), 4)) or ("{}",)
    else:
        pieces = tuple(
            ("" if i == 0 else " ") + _WORDS[rng.randrange(len(_WORDS))] for i in range(n)
        )
    offsets = []
    t = ttft_ms
    for _ in pieces:
        offsets.append(int(t * 1e6))
        t += _lognormal(rng, cfg.itl_ms, cfg.itl_sigma)
    disconnect = len(pieces) // 2 if rng.random() < cfg.disconnect_rate else None
    return ResponsePlan(
        ttft_ns=int(ttft_ms * 1e6),
        token_offsets_ns=tuple(offsets),
        pieces=pieces,
        tool_name=tool_name,
        tool_arguments=arguments,
        prompt_tokens=prompt_tokens,
        fail_status=fail,
        disconnect_after=disconnect,
    )


def _prompt_chars(request: dict[str, Any]) -> int:
    prompt = request.get("prompt")
    if isinstance(prompt, str):
        return len(prompt)
    total = 0
    for m in request.get("messages") or ():
        if isinstance(m, dict):
            content = m.get("content")
            total += len(content) if isinstance(content, str) else len(str(content or ""))
    return total


def fake_arguments(schema: dict[str, Any], rng: random.Random, depth: int = 0) -> Any:
    """A value that satisfies a (simple) JSON Schema: types, enums, required, items."""
    if schema.get("enum"):
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return fake_arguments(schema[key][0], rng, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object":
        props = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        out = {}
        for name, sub in props.items():
            if name in required or (depth < 2 and rng.random() < 0.3):
                out[name] = fake_arguments(sub if isinstance(sub, dict) else {}, rng, depth + 1)
        return out
    if kind == "array":
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        lo = int(schema.get("minItems", 1))
        return [fake_arguments(items or {}, rng, depth + 1) for _ in range(max(lo, 1))]
    if kind == "integer":
        lo = int(schema.get("minimum", 1))
        hi = int(schema.get("maximum", lo + 99))
        return rng.randint(lo, max(lo, hi))
    if kind == "number":
        flo = float(schema.get("minimum", 0.0))
        fhi = float(schema.get("maximum", flo + 100.0))
        return round(rng.uniform(flo, fhi), 3)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return _WORDS[rng.randrange(len(_WORDS))]
