"""``ab`` side types as plugins: a deployment ab starts for each run of a side.

A side given as ``NAME:MODE`` (``llama:ngram``, ``vllm:none``, a plugin's
``simproc:fast``) names a side type registered under ``NAME`` in the entry-point group
``loadtest.sides``; loadtest's own ``llama`` and ``vllm`` are registered exactly as a
third party's (``app.ab.side_kinds``). A type declares how it reads its MODE, how one run's
server starts (its command on a loopback port, the model it serves, how long it may take
to stop) and what a check says each run pays to start it. The rest is the same for
every type (``app.ab.sides.run_side``): a free port, the cold start (to ``/health``, then
to a first streamed token), resident memory and energy through the run, the stop and
``deployment.json``; each run scrapes the server's ``/metrics`` as any endpoint's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from loadtest.errors import UsageError
from loadtest.registry import Registry

__all__ = ["SIDE_TYPES", "Launch", "SideType"]


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


SIDE_TYPES: Registry[SideType] = Registry(
    "loadtest.sides",
    "ab side type",
    protocol=SideType,
    error=UsageError,
    # A URL's scheme and the built-in simulator are sides, not types.
    reserved=frozenset({"http", "https", "sim"}),
)
