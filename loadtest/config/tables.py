"""Scenario tables that features own, parsed by the feature, found by the table's name.

A feature declares its scenario table and that table's checks in one place, its own
module, and registers the parser under the table's name in the entry-point group
``loadtest.tables`` (loadtest's own are in its pyproject.toml, as its prompt sources and
fault kinds are). ``parse_scenario`` asks for each table here (``TableSlot.parse``), so
this layer imports no feature: the dynamic import is the plugin mechanism, as for
prompt sources (``sources``). The values are this layer's types (``feature_specs``),
checked on the way back, so a ``Scenario`` stays typed.

A parser is called with the scenario's top-level table and the scenario file's folder
(paths in a table are relative to it); it reads its own key (``top.sub(name)``), and its
errors name the file, the table and the key, as every scenario error does.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Protocol, Self, TypeVar

from loadtest.config.toml_tables import Table
from loadtest.errors import LoadtestError
from loadtest.registry import Registry

__all__ = ["GROUP", "TABLES", "HasTables", "TableParser", "TableSlot"]

GROUP = "loadtest.tables"
"""The entry-point group table parsers register in, by table name."""

T = TypeVar("T")

TableParser = Callable[[Table, Path], object]
"""``parser(top, base)``: the value of one table of the scenario ``top``."""


def _two_arguments(plugin: object) -> str | None:
    """Why ``plugin`` cannot be called as ``parser(top, base)``, or None."""
    if not callable(plugin):
        return "is not callable as parser(top, base)"
    try:
        inspect.signature(plugin).bind(None, None)
    except TypeError:
        return f"cannot be called as parser(top, base): it takes {inspect.signature(plugin)}"
    except ValueError:
        return None  # a builtin without a signature: taken on trust
    return None


TABLES: Registry[TableParser] = Registry(
    GROUP, "table parser", check=_two_arguments, error=LoadtestError
)


class HasTables(Protocol):
    """What holds a scenario's tables (``Scenario``): each table's value by name."""

    def table(self, name: str) -> object | None:
        """The value of the table ``name``; None when the file has no such table."""
        ...

    def with_table(self, name: str, value: object) -> Self:
        """A copy with the table ``name`` holding ``value``."""
        ...


S = TypeVar("S", bound=HasTables)


@dataclass(frozen=True, slots=True)
class TableSlot(Generic[T]):
    """A table of the scenario owned by a feature: its name, the type of its value and
    what makes the value of a scenario without the table (None: the table is optional;
    made anew at each read, so that no two scenarios share a mutable default).

    Readers take the typed value from the scenario here (``of``, ``get``), a plugin's
    table and loadtest's own alike; ``Scenario`` has no field per feature."""

    name: str
    value_type: type[T]
    default: Callable[[], T] | None = None

    def get(self, scenario: HasTables) -> T | None:
        """The table's value, else its default (None where it has none)."""
        value = scenario.table(self.name)
        if value is None:
            return None if self.default is None else self.default()
        if not isinstance(value, self.value_type):  # a parser checked on the way in
            raise TypeError(f"[{self.name}] holds a {type(value).__name__}")
        return value

    def of(self, scenario: HasTables) -> T:
        """The table's value, else its default; for a table that has one."""
        value = self.get(scenario)
        if value is None:
            raise TypeError(f"the [{self.name}] table has no default: use get()")
        return value

    def put(self, scenario: S, value: T) -> S:
        """A copy of the scenario whose table holds ``value``."""
        return scenario.with_table(self.name, value)

    def parse(self, top: Table, base: Path) -> T:
        """The registered parser's value for this table; a ``ScenarioError`` naming the
        table when no parser is registered, or it gives something else."""
        if self.name not in TABLES:
            raise top.fail(
                self.name,
                f"no parser for the [{self.name}] table is registered (entry-point group "
                f"{GROUP}): loadtest is not installed whole; reinstall it",
            )
        try:
            parser = TABLES.load(self.name)
        except LoadtestError as exc:
            raise top.fail(self.name, str(exc)) from exc
        value = parser(top, base)
        if not isinstance(value, self.value_type):
            raise top.fail(
                self.name,
                f"the [{self.name}] parser gave a {type(value).__name__}, "
                f"not a {self.value_type.__name__}",
            )
        return value
