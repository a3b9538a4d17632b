"""``ab`` side types as plugins: a deployment ab starts for each run of a side.

A side given as ``NAME:MODE`` (``sim:spec``, ``llama:ngram``, ``vllm:none``, a plugin's
``simproc:fast``) names a side type registered under ``NAME`` in the entry-point group
``loadtest.sides``; loadtest's own ``sim``, ``llama`` and ``vllm`` are registered exactly
as a third party's (``app.ab.side_kinds``). A type declares how it reads its MODE, how one run's
server starts (its command on a loopback port, the model it serves, how long it may take
to stop), what a check says each run pays to start it, and, where it has them, whether
it speculates, its draft length (``--draft-max``) and the settings ``--server-sweep``
may vary (``SideTypeBase`` has a default for each of those). The rest is the same for
every type (``app.ab.sides.run_side``): a free port, the cold start (to ``/health``, then
to a first streamed token), resident memory and energy through the run, the stop and
``deployment.json``; each run scrapes the server's ``/metrics`` as any endpoint's.

A type whose server each run starts itself (loadtest's ``sim``: the built-in simulator)
says so with ``in_run``, which gives the run's options instead: nothing is launched or
measured around the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, cast, runtime_checkable

from loadtest.app.run_options import RunOptions
from loadtest.errors import UsageError
from loadtest.registry import Registry

__all__ = [
    "SIDE_TYPES",
    "Launch",
    "SideType",
    "SideTypeBase",
    "draft_max_of",
    "draft_setting_of",
    "in_run_of",
    "setting_of",
    "speculates_of",
    "whole",
]


@dataclass(frozen=True, slots=True)
class Launch:
    """How one run's server of a side starts: ``command`` serves the OpenAI API on the
    host and port ``launch`` was given, with ``GET /health`` answering 200 once ready."""

    command: tuple[str, ...]
    model: str
    """The model name the server answers to (the run's ``model`` unless one is given)."""
    stop_grace_s: float = 15.0
    """How long it may take to exit on SIGTERM before it and its children are killed."""


@runtime_checkable
class SideType(Protocol):
    """What an ``ab`` side type declares (an object, registered by its ``NAME``)."""

    @property
    def start_cost(self) -> str:
        """What each of its runs pays before the load, in a few words (``ab --check``)."""
        ...

    def parse(self, mode: str, given: str) -> object:
        """Its settings from what follows ``NAME:`` (``UsageError`` naming ``given``)."""
        ...

    def launch(self, settings: Any, host: str, port: int) -> Launch:
        """How to start one run's server on ``host``:``port``. Called before the run's
        clock starts: work that is not a cold start (a download, a conversion) goes here."""
        ...


class SideTypeBase:
    """What a side type may declare beyond ``SideType`` (``start_cost``, ``parse`` and
    ``launch``, which a type writes itself), with its defaults: no speculation known, no
    draft length, no server settings. A type that does not subclass it gets these
    defaults too (``speculates_of`` and the like), so one written before they existed
    still loads.

    - ``draft_setting``: what ``--draft-max`` varies on its sides, in words.
    - ``speculates(settings)``: whether a side speculates (None: cannot tell): a known
      draft's near-zero acceptance is shown, a side that may draft nothing gets none.
    - ``with_draft_max(settings, k)``: the settings at draft length ``k``; None: none.
    - ``with_setting(settings, name, value)``: the settings with ``name`` at ``value``
      (``--server-sweep``); ``UsageError`` saying what it takes.
    - ``in_run(settings, options)``: the options of a run whose own process serves the
      side (the built-in simulator); None, the default: ``launch`` starts its server.
    """

    draft_setting: str = "the draft length (tokens drafted per step)"
    server_settings: tuple[str, ...] = ()

    def speculates(self, settings: Any) -> bool | None:
        """Cannot tell."""
        return None

    def with_draft_max(self, settings: Any, k: int) -> object | None:
        """No draft length."""
        return None

    def with_setting(self, settings: Any, name: str, value: float) -> object:
        """No settings."""
        raise UsageError("this side type has no setting --server-sweep may vary")

    def in_run(self, settings: Any, options: RunOptions) -> RunOptions | None:
        """Launched: its server is not the run's own."""
        return None


def whole(value: float) -> int:
    """``value`` as a count of at least 1 (a setting's), or ``UsageError``."""
    if value != int(value) or value < 1:
        raise UsageError("a whole number >= 1")
    return int(value)


SIDE_TYPES: Registry[SideType] = Registry(
    "loadtest.sides",
    "ab side type",
    protocol=SideType,
    error=UsageError,
    # A URL's scheme is a side, not a type.
    reserved=frozenset({"http", "https"}),
)


_BASE = SideTypeBase()


def speculates_of(kind: SideType, settings: object) -> bool | None:
    """``kind.speculates(settings)``, or the default where the type has none."""
    return cast(bool | None, getattr(kind, "speculates", _BASE.speculates)(settings))


def draft_max_of(kind: SideType, settings: object, k: int) -> object | None:
    """``kind.with_draft_max(settings, k)``, or the default (no draft length)."""
    return getattr(kind, "with_draft_max", _BASE.with_draft_max)(settings, k)


def draft_setting_of(kind: SideType) -> str:
    """``kind.draft_setting``, or the default words."""
    return str(getattr(kind, "draft_setting", _BASE.draft_setting))


def setting_of(kind: SideType, settings: object, name: str, value: float) -> object:
    """``kind.with_setting(settings, name, value)``, or the default (``UsageError``)."""
    return getattr(kind, "with_setting", _BASE.with_setting)(settings, name, value)


def in_run_of(kind: SideType, settings: object, options: RunOptions) -> RunOptions | None:
    """``kind.in_run(settings, options)``, or the default (None: launched); a
    ``UsageError`` naming the type where it gives anything else."""
    made = getattr(kind, "in_run", _BASE.in_run)(settings, options)
    if made is not None and not isinstance(made, RunOptions):
        raise UsageError(
            f"the ab side type {type(kind).__name__} gave {type(made).__name__} from in_run: "
            "the run's options (RunOptions), or None: see docs/plugins.md"
        )
    return made
