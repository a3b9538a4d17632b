"""Prompt sources as plugins: one object per kind, found by name through entry points.

A source kind declares, in one place, the keys its ``[[sources]]`` table takes (beyond
``kind``, ``category``, ``weight`` and ``max_tokens``), whether it needs a ``path``, and how
it loads its prompts. loadtest's own kinds are registered exactly as a third party's are:
as entry points in the group ``loadtest.sources`` (loadtest's are in its pyproject.toml),
so adding a kind edits no list here or in the data sets. A kind that also has
``parse_keys`` (a ``TypedSource``) turns its keys into a typed value of its own
(``SourceSpec.own``); its keys that neither ``SourceSpec`` nor that value hold arrive in
``SourceSpec.options``, whatever another kind calls its keys.

The plugin objects are loaded on first use (``importlib.metadata``; loadtest's own from
the checkout's pyproject.toml when it runs from one: ``_compat.plugins``), so that parsing a
scenario imports only the sources it names: the dynamic import is the plugin mechanism,
not a dependency of this layer on the data sets.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from loadtest.errors import DatasetError
from loadtest.registry import Registry

if TYPE_CHECKING:
    from loadtest.config.source_spec import SourceSpec
    from loadtest.config.toml_tables import Table
    from loadtest.model.prompt import Prompt

__all__ = [
    "GROUP",
    "SOURCES",
    "SourcePlugin",
    "TypedSource",
    "source_kinds",
    "source_plugin",
]

GROUP = "loadtest.sources"
"""The entry-point group prompt sources register in."""


@runtime_checkable
class SourcePlugin(Protocol):
    """What a prompt source kind declares (an object, registered by its kind's name)."""

    @property
    def keys(self) -> frozenset[str]:
        """The table keys it takes beyond the common ones."""
        ...

    @property
    def needs_path(self) -> bool:
        """Whether its table must name a ``path`` (relative to the scenario file)."""
        ...

    def load(self, spec: SourceSpec, tokenizer: object | None) -> list[Prompt]:
        """Every prompt of one source, filtered as ``spec`` says; ``DatasetError``
        naming the file and line (or the package) when it cannot. ``tokenizer`` is the
        endpoint's ``loadtest.datasets.tokenizer.Tokenizer`` where it has one (typed
        ``object`` here: the data sets sit above this layer)."""
        ...


@runtime_checkable
class TypedSource(SourcePlugin, Protocol):
    """A source kind whose keys are a typed value of its own (loadtest's workload kinds
    are; a third party's may be)."""

    def parse_keys(self, table: Table, base: Path) -> object:
        """Its keys of one ``[[sources]]`` table (relative paths against ``base``, the
        scenario's folder), or None when it has none; errors through ``table.fail``,
        which names the file, table and key. The value's dataclass fields are the table
        keys it holds: they are kept out of ``SourceSpec.options``."""
        ...


SOURCES: Registry[SourcePlugin] = Registry(
    GROUP, "prompt source kind", protocol=SourcePlugin, error=DatasetError
)


def source_kinds() -> tuple[str, ...]:
    """The names of every registered kind (loadtest's and installed plugins')."""
    kinds = SOURCES.names()
    if not kinds:
        # loadtest's own kinds come from its installed metadata: none means a checkout
        # imported without being installed, or an install older than the plugins.
        raise DatasetError(
            "no prompt source kinds are registered (entry points loadtest.sources): "
            "install loadtest (pip install -e . in a checkout) so its own are found"
        )
    return kinds


def source_plugin(kind: str) -> SourcePlugin:
    """The plugin registered as ``kind``; ``DatasetError`` when none is, or it is no
    ``SourcePlugin`` (each member it lacks named)."""
    return SOURCES.load(kind)


def plugin_keys() -> Mapping[str, frozenset[str]]:
    """Each registered kind's own keys (loading every plugin: for ``--help`` and docs)."""
    return {kind: source_plugin(kind).keys for kind in source_kinds()}
