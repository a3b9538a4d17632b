"""Live outputs as plugins: where a run's figures go while it runs, found by name.

A live output kind declares its command-line flag (``--prometheus HOST:PORT``) and
opens an output from the flag's value. An output is shown each view of the run (once a
second, and the last one when the run ends, with the run's summary) as Prometheus
metric families (``live.families``), already built: the outputs never read the
run's metrics themselves, so each costs the run nothing beyond its own I/O, in the
exporter's thread. loadtest's own (``prometheus``, ``pushgateway``: ``live.kinds``) register in the
entry-point group ``loadtest.live`` exactly as a third party's would (docs/plugins.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from loadtest.errors import UsageError
from loadtest.registry import Registry

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from loadtest.live.view import LiveView

__all__ = ["GROUP", "LIVE_OUTPUTS", "LiveOutput", "LiveOutputKind"]

GROUP = "loadtest.live"


@runtime_checkable
class LiveOutput(Protocol):
    """One open output (a server, a client of a collector)."""

    def show(self, view: LiveView, families: Sequence[Metric]) -> None:
        """Take the run's latest view; ``view.summary`` is set on a run's last one."""
        ...

    def close(self) -> None:
        """The command is done: stop serving or sending (this may wait a little, as
        for a last scrape)."""
        ...


@runtime_checkable
class LiveOutputKind(Protocol):
    """A kind of live output, registered under a name of its own."""

    @property
    def flag(self) -> str:
        """Its command-line flag on ``run``, ``sweep`` and ``ab`` (``--prometheus``)."""
        ...

    @property
    def metavar(self) -> str:
        """What the flag takes, for ``--help`` (``HOST:PORT``)."""
        ...

    @property
    def help(self) -> str:
        """One line for ``--help``."""
        ...

    def open(self, value: str) -> LiveOutput:
        """The output for the flag's ``value``; ``UsageError`` naming the flag when the
        value is wrong or cannot be served (a port taken)."""
        ...


LIVE_OUTPUTS: Registry[LiveOutputKind] = Registry(
    GROUP, "live output", protocol=LiveOutputKind, error=UsageError
)
