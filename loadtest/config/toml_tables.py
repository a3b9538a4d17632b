"""Reading TOML tables with errors that name the file, the dotted key and what was expected."""

from __future__ import annotations

import contextlib
import difflib
import math
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

from loadtest.errors import ScenarioError

__all__ = ["Table", "every_unknown_key"]

T = TypeVar("T")

_UNKNOWN: ContextVar[list[tuple[str, str, str]] | None] = ContextVar("unknown_keys", default=None)
"""While a file is read inside ``every_unknown_key``: its unknown keys so far, as (file,
dotted key, hint). Outside one, the first unknown key raises at once."""


def _hint(name: str, known: frozenset[str] | set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return f"expected one of: {', '.join(sorted(known)) or 'no keys'}"


def _unknown_error(found: list[tuple[str, str, str]]) -> ScenarioError:
    path, key, hint = found[0]
    problem = f"unknown key ({hint})"
    if len(found) > 1:
        rest = "; ".join(f"{k} ({h})" for _, k, h in found[1:])
        problem += f"; {len(found) - 1} more unknown: {rest}"
    return ScenarioError(path, key, problem)


@contextlib.contextmanager
def every_unknown_key() -> Iterator[None]:
    """Read a whole file, then name every unknown key of it in one error (each with the
    closest known key), not one per attempt. An error raised on the way by a key that
    is known keeps its own message, after the unknown keys (a misspelt key is often why
    a required one is missing)."""
    found: list[tuple[str, str, str]] = []
    token = _UNKNOWN.set(found)
    try:
        yield
    except ScenarioError as exc:
        if not found:
            raise
        combined = _unknown_error(found)
        raise ScenarioError(combined.path, combined.key, f"{combined.problem}; and {exc}") from exc
    finally:
        _UNKNOWN.reset(token)
    if found:
        raise _unknown_error(found)


class Table:
    """Reads one TOML table, remembering which keys were used.

    ``finish()`` then rejects every key nobody asked for, so a typo such as
    ``concurency`` fails loudly instead of silently falling back to a default.
    """

    def __init__(self, data: Any, path: str, prefix: str) -> None:
        if not isinstance(data, dict):
            raise ScenarioError(path, prefix or "(top level)", "expected a table")
        self.data = data
        self.path = path
        self.prefix = prefix
        self.used: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.prefix}.{name}" if self.prefix else name

    def fail(self, name: str, problem: str) -> ScenarioError:
        return ScenarioError(self.path, self.key(name), problem)

    def get(self, name: str, kind: type[T] | tuple[type, ...], default: Any, what: str) -> Any:
        self.used.add(name)
        if name not in self.data:
            return default
        value = self.data[name]
        # bool is an int in Python; never accept one where a number is expected.
        if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.fail(name, f"expected {what}, got {value!r}")
        if not isinstance(value, kind):
            raise self.fail(name, f"expected {what}, got {value!r}")
        return value

    def number(
        self, name: str, default: float | None, *, minimum: float = 0.0, strict: bool = False
    ) -> float | None:
        v = self.get(name, (int, float), default, "a number")
        if v is None:
            return None
        v = float(v)
        if not math.isfinite(v) or v < minimum or (strict and v == minimum):
            bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
            raise self.fail(name, f"expected a number {bound}, got {v!r}")
        return v

    def integer(self, name: str, default: int | None, *, minimum: int = 0) -> int | None:
        v = self.get(name, int, default, "an integer")
        if v is not None and v < minimum:
            raise self.fail(name, f"expected an integer >= {minimum}, got {v!r}")
        return v  # type: ignore[no-any-return]

    def choice(self, name: str, default: str, choices: tuple[str, ...]) -> str:
        v = self.get(name, str, default, f"one of {', '.join(choices)}")
        if v not in choices:
            raise self.fail(name, f"expected one of {', '.join(choices)}, got {v!r}")
        return v  # type: ignore[no-any-return]

    def strings(self, name: str) -> tuple[str, ...]:
        v = self.get(name, list, [], "a list of strings")
        if not all(isinstance(s, str) for s in v):
            raise self.fail(name, f"expected a list of strings, got {v!r}")
        return tuple(v)

    def sub(self, name: str) -> Table:
        self.used.add(name)
        return Table(self.data.get(name, {}), self.path, self.key(name))

    def finish(self, allowed: frozenset[str] | None = None) -> None:
        known = self.used if allowed is None else allowed
        collecting = _UNKNOWN.get()
        for name in self.data:
            if name not in known:
                if collecting is None:
                    raise self.fail(name, f"unknown key ({_hint(name, known)})")
                collecting.append((self.path, self.key(name), _hint(name, known)))
