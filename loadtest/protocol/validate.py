"""Tool-call validity: JSON arguments, the function's JSON Schema, BFCL's expected answers.

Two questions, kept apart on purpose: *valid* (did the deployment produce a well-formed
call to a function it was offered, with arguments that satisfy the schema) is a property
of the serving stack, and an invalid call fails the request with ``invalid_output``;
*correct* (does it match BFCL's expected call) is a property of the model and is reported
as accuracy, not as a failure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from loadtest.model.json import JsonObject
from loadtest.protocol.openai import ToolCall
from loadtest.protocol.schema import repaired

__all__ = ["ToolCallVerdict", "ToolValidator", "matches_expected"]


@dataclass(frozen=True, slots=True)
class ToolCallVerdict:
    """The judgement of all tool calls of one response."""

    calls: int
    valid: bool
    """Every call names an offered function and its arguments satisfy the schema."""
    first_valid_ns: int | None
    """Arrival of the chunk that completed the first valid call."""
    correct: bool | None
    """Matches BFCL's expected calls; None where no expectation exists."""
    problem: str | None = None


class ToolValidator:
    """Validators compiled once per distinct tool list, reused across requests."""

    def __init__(self) -> None:
        self._cache: dict[int, dict[str, Draft202012Validator | None]] = {}

    def _validators(self, tools: Sequence[JsonObject]) -> dict[str, Draft202012Validator | None]:
        key = id(tools)
        found = self._cache.get(key)
        if found is None:
            found = {}
            for tool in tools:
                fn = tool.get("function", {})
                try:
                    # An enum that contradicts its type is a hint (protocol.schema).
                    found[fn.get("name", "")] = Draft202012Validator(
                        repaired(fn.get("parameters") or {"type": "object"})
                    )
                except SchemaError:
                    found[fn.get("name", "")] = None  # an unusable schema checks JSON only
            # Prompt tool tuples live as long as the pool, so their id() is stable.
            self._cache[key] = found
        return found

    def judge(
        self,
        calls: list[ToolCall],
        tools: Sequence[JsonObject],
        expected: Sequence[JsonObject] | None,
        name_map: Sequence[tuple[str, str]] = (),
    ) -> ToolCallVerdict:
        """Judge the assembled calls of one response against the offered tools."""
        validators = self._validators(tools)
        problem = None
        first_valid: int | None = None
        parsed: list[tuple[str, Any]] = []
        for call in sorted(calls, key=lambda c: c.completed_ns):
            why = _check(call, validators)
            if why is None:
                if first_valid is None:
                    first_valid = call.completed_ns
                parsed.append((call.name, orjson.loads(call.arguments or "{}")))
            elif problem is None:
                problem = why
        correct = None
        if expected is not None and calls:
            names = dict(name_map)
            correct = problem is None and matches_expected(
                [(names.get(n, n), a) for n, a in parsed], expected
            )
        return ToolCallVerdict(
            calls=len(calls),
            valid=problem is None and bool(calls),
            first_valid_ns=first_valid,
            correct=correct,
            problem=problem,
        )


def _check(call: ToolCall, validators: dict[str, Draft202012Validator | None]) -> str | None:
    if call.name not in validators:
        return f"call {call.index}: function {call.name!r} was not offered"
    try:
        args = orjson.loads(call.arguments or "{}")
    except orjson.JSONDecodeError:
        return f"call {call.index} ({call.name}): arguments are not JSON: {call.arguments[:80]!r}"
    if not isinstance(args, dict):
        return f"call {call.index} ({call.name}): arguments are not a JSON object"
    validator = validators[call.name]
    if validator is not None:
        err = next(iter(validator.iter_errors(args)), None)
        if err is not None:
            where = "/".join(str(p) for p in err.absolute_path) or "(root)"
            return f"call {call.index} ({call.name}): {where}: {err.message}"
    return None


def matches_expected(calls: Sequence[tuple[str, Any]], expected: Sequence[JsonObject]) -> bool:
    """True when the calls match BFCL's ground truth, in any order.

    Each expected entry is ``{function: {param: [allowed values]}}``; an allowed value
    of ``""`` means the parameter may be left out.
    """
    if len(calls) != len(expected):
        return False
    remaining = list(expected)
    for name, args in calls:
        for i, want in enumerate(remaining):
            if _one_matches(name, args, want):
                del remaining[i]
                break
        else:
            return False
    return True


def _one_matches(name: str, args: Any, want: JsonObject) -> bool:
    if len(want) != 1 or name not in want or not isinstance(args, dict):
        return False
    spec = want[name]
    for param, allowed in spec.items():
        if param not in args:
            if "" not in allowed:
                return False
            continue
        if not any(_same(args[param], a) for a in allowed if a != "" or args[param] == ""):
            return False
    return all(p in spec for p in args)


def _same(got: Any, want: Any) -> bool:
    if isinstance(got, bool) or isinstance(want, bool):
        return got is want
    if isinstance(got, int | float) and isinstance(want, int | float):
        return math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(got, str) and isinstance(want, str):
        return got.strip().lower() == want.strip().lower()
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    if isinstance(got, dict) and isinstance(want, dict):
        # BFCL nests allowed-value lists inside dict values too.
        return got.keys() <= want.keys() and all(
            _same(got[k], want[k])
            or (isinstance(want[k], list) and any(_same(got[k], w) for w in want[k]))
            for k in got
        )
    return bool(got == want)
