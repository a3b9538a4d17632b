"""Workload sources as plugins: how a source that is more than a pool of prompts runs.

A prompt source (``config.sources``) says how its prompts load. A *workload* source
runs differently from a pool drawn at random: a trace sends its lines at their recorded
times, a conversation its turns in order, an agent trace whole sessions, a synthetic
source prompts cut to exact lengths with the endpoint's tokenizer. Such a kind also
registers a ``WorkloadKind`` under the same name in the entry-point group
``loadtest.workloads``: what the run takes for it (a unit of load or a pool, hooks, the
scenario with its own arrival plan) and **how its work is split** over N workers, which
it does itself from the ``share`` it is given (a trace by line, conversations and
sessions by their number, a synthetic pool by the worker's own seed). loadtest's own
four are in ``features/workloads/``, registered as a third party's would be.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from loadtest.errors import DatasetError
from loadtest.registry import Registry

if TYPE_CHECKING:
    from loadtest.config.scenario import Scenario, SourceSpec
    from loadtest.datasets import PromptPool
    from loadtest.datasets.tokenizer import Tokenizer
    from loadtest.engine.hooks import RunHook, UnitOfLoad

__all__ = ["GROUP", "OWN", "WORKLOADS", "Share", "Workload", "WorkloadKind", "workload_kind"]

GROUP = "loadtest.workloads"
"""The entry-point group workload kinds register in, by their source kind's name."""

Share = tuple[int, int, int]
"""``(worker, workers, the run's seed)``: which part of the work is this process's."""


@dataclass(frozen=True, slots=True)
class Workload:
    """What the runner takes for a workload scenario."""

    scenario: Scenario
    """The scenario, with a trace's arrival plan in ``load`` where it has one."""
    pool: PromptPool | None
    unit: UnitOfLoad | None
    hooks: tuple[RunHook, ...]
    counts: dict[str, int]


@runtime_checkable
class WorkloadKind(Protocol):
    """What a workload source kind declares (an object, registered by the kind's name)."""

    @property
    def sole(self) -> bool:
        """Whether it must be the scenario's only source (it runs in an order of its own)."""
        ...

    @property
    def timed(self) -> bool:
        """Whether it has recorded times, which ``--speedup`` compresses."""
        ...

    @property
    def cuts_lengths(self) -> bool:
        """Whether it cuts exact lengths with a tokenizer (``--tokenizer`` applies)."""
        ...

    def needs_tokenizer(self, spec: SourceSpec) -> bool:
        """Whether it needs the endpoint's tokenizer (it names no ``tokenizer`` file)."""
        ...

    def prepare(
        self,
        scenario: Scenario,
        spec: SourceSpec,
        model: str,
        tokenizer: Tokenizer | None,
        share: Share,
    ) -> Workload:
        """This process's part of the work; ``DatasetError`` naming the file when it
        cannot (too little to split over the workers, bad input)."""
        ...

    def plan_line(self, scenario: Scenario, spec: SourceSpec) -> str:
        """What ``--check`` prints of it (its size, span, rate, lengths)."""
        ...


OWN = frozenset({"synthetic", "trace", "conversations", "agent-trace"})
"""loadtest's own workload kinds: one missing from the group is a broken install, which
would otherwise run a trace as a random pool."""


WORKLOADS: Registry[WorkloadKind] = Registry(
    GROUP, "workload kind", protocol=WorkloadKind, error=DatasetError
)


def workload_kind(kind: str) -> WorkloadKind | None:
    """The workload registered for the source kind ``kind``; None when the kind is a
    plain pool of prompts; ``DatasetError`` when its plugin is broken."""
    if kind not in WORKLOADS:
        if kind in OWN:
            raise DatasetError(
                f"no workload is registered for the {kind!r} source (entry-point group "
                f"{GROUP}): loadtest is not installed whole; reinstall it"
            )
        return None
    return WORKLOADS.load(kind)
