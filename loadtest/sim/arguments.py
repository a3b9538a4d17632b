"""Tool-call arguments the simulated model sends: schema-valid unless asked otherwise.

Read as the validator reads the schema (``loadtest.protocol.schema``): an ``enum`` that
contradicts its ``type`` is a hint, and a required property the schema does not describe
still gets a value, so a simulator told to make no invalid calls makes none.
"""

from __future__ import annotations

import random
from typing import Any

from loadtest.model.json import JsonObject
from loadtest.protocol.schema import fitting_enum

__all__ = ["WORDS", "fake_arguments", "padded", "tool_results"]

WORDS = (
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
)
"""The simulated model's vocabulary (text answers and string arguments)."""


def fake_arguments(schema: JsonObject, rng: random.Random, depth: int = 0) -> Any:
    """A value that satisfies a (simple) JSON Schema: types, enums, required, items."""
    enum = fitting_enum(schema)
    if enum is not None:
        return rng.choice(enum)
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            return fake_arguments(schema[key][0], rng, depth + 1)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if kind == "object":
        props = schema.get("properties") or {}
        required = [r for r in schema.get("required") or () if isinstance(r, str)]
        out = {}
        for name, sub in props.items():
            if name in required or (depth < 2 and rng.random() < 0.3):
                out[name] = fake_arguments(sub if isinstance(sub, dict) else {}, rng, depth + 1)
        for name in required:
            if name not in out:  # required but not described: any value will do
                out[name] = WORDS[rng.randrange(len(WORDS))]
        return out
    if kind == "array":
        raw = schema.get("items")
        items: JsonObject = raw if isinstance(raw, dict) else {}
        if schema.get("enum") and "enum" not in items:
            items = {**items, "enum": schema["enum"]}  # the enum describes the items
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
    return WORDS[rng.randrange(len(WORDS))]


def padded(word: str, size: int) -> str:
    """``word`` repeated to exactly ``size`` characters (``word`` itself for 0): a piece
    whose length, and so the bytes a client must receive, is known in advance."""
    if size <= 0 or not word:
        return word
    return (word * (size // len(word) + 1))[:size]


def tool_results(request: JsonObject) -> int:
    """Tool results since the last user message, not counting rejections.

    A rejection is the error loadtest sends back for an invalid call (a JSON object with
    an ``error`` key): the model is asked to call again, not to move on.
    """
    n = 0
    for m in reversed(request.get("messages") or ()):
        if not isinstance(m, dict) or m.get("role") == "user":
            break
        if m.get("role") == "tool":
            content = m.get("content")
            if not (isinstance(content, str) and content.startswith('{"error"')):
                n += 1
    return n
