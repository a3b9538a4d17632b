"""Command-line flags declared once, on the field of the options they set.

A field made with ``flag(...)`` carries its flag: name, help, group, and the bound its
value must keep. The CLI builds its arguments from the declarations and reads the values
back by field name (``loadtest.cli.flags``); ``check_bounds`` holds a Python caller's
values to the same bounds, with the same words. Declared next to the field, a flag's
default, type and bound cannot drift apart from the option's, as they did when the CLI
copied every field by hand (AIPerf's ``CLIParameter`` beside pydantic's ``ge`` is the model).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from loadtest.errors import UsageError

__all__ = ["Flag", "check_bounds", "declared_flags", "flag"]


@dataclass(frozen=True, slots=True)
class Flag:
    """How one option is given on the command line, and which values it may take."""

    help: str
    name: str = ""
    """``--max-tokens``; empty: the field's name with dashes."""
    metavar: str | None = None
    kind: Callable[[str], Any] | None = None
    """What turns the text into the value (``int``, ``float``); None: the text."""
    scope: str = "runs"
    """Which commands take it, where one set of options serves several: ``runs`` (run,
    sweep, ab), ``load`` (run and ab). A command taking every flag asks for no scope."""
    group: str = ""
    """The title of the ``--help`` section it is listed under; empty: the main list."""
    exclusive: str = ""
    """Flags with the same word here exclude each other (``--duration``/``--requests``)."""
    switch: bool = False
    """Given alone (``--insecure``): sets True."""
    negated: bool = False
    """Given alone, sets False: the flag is ``--no-<field>`` (``--no-tui``)."""
    repeated: bool = False
    """May be given again, each value kept in order (a tuple of them)."""
    split: str = ""
    """Each value given is split on this too (``--source-address a,b``)."""
    choices: tuple[str, ...] = ()
    shown_default: str | None = None
    """The value the flag takes when not given, as written (``--loop``'s ``asyncio``)."""
    read: Callable[[Any], Any] | None = None
    """Turns what argparse parsed into the field's value (``--loop uvloop`` -> True)."""
    positive: bool = False
    finite: bool = False
    minimum: float | None = None
    maximum: float | None = None
    not_blank: bool = False

    def flag_name(self, field_name: str) -> str:
        """The flag as typed: ``--max-tokens``, ``--no-tui``."""
        if self.name:
            return self.name
        dashed = field_name.replace("_", "-")
        return f"--no-{dashed}" if self.negated else f"--{dashed}"

    def check(self, field_name: str, value: object) -> None:
        """Raise ``UsageError`` naming the flag when ``value`` breaks its bound."""
        if value is None or isinstance(value, bool):
            return
        name = self.flag_name(field_name)
        if isinstance(value, str):
            if self.not_blank and not value.strip():
                raise UsageError(f"{name} must not be empty")
            return
        if not isinstance(value, int | float):
            return
        if self.finite and not math.isfinite(value):
            raise UsageError(f"{name} must be a finite number, got {value}")
        got = f"got {_shown(value)}"
        if self.positive and not value > 0:
            raise UsageError(f"{name} must be positive, {got}")
        low, high = self.minimum, self.maximum
        if low is not None and high is not None and not low <= value <= high:
            raise UsageError(f"{name} must be between {low:g} and {high:g}, {got}")
        if low is not None and value < low:
            least = "0 or more" if low == 0 else f"at least {low:g}"
            raise UsageError(f"{name} must be {least}, {got}")
        if high is not None and value > high:
            raise UsageError(f"{name} must be at most {high:g}, {got}")


def _shown(value: float) -> str:
    """A value as the user typed it: a count whole (``-12345678``, not ``-1.23457e+07``),
    a float at most six significant digits."""
    return str(value) if isinstance(value, int) else f"{value:g}"


def flag(default: Any, **declared: Any) -> Any:
    """A dataclass field whose default is ``default`` and whose flag is ``Flag(**declared)``."""
    return dataclasses.field(default=default, metadata={"flag": Flag(**declared)})


def declared_flags(options: type | object) -> Iterator[tuple[dataclasses.Field[Any], Flag]]:
    """Each field of the options dataclass that has a flag, with its flag, in order."""
    for f in dataclasses.fields(options):  # type: ignore[arg-type]
        declared = f.metadata.get("flag")
        if isinstance(declared, Flag):
            yield f, declared


def check_bounds(options: object) -> None:
    """Raise ``UsageError`` for the first value outside its flag's bound."""
    for f, declared in declared_flags(options):
        declared.check(f.name, getattr(options, f.name))
