"""Stop rules as plugins: when a run ends before its duration or request count.

``[load]`` bounds a run by time or count; a ``[[load.stop]]`` table adds a rule of a
registered kind (entry-point group ``loadtest.stops``), judged in every process that
sends load after each request it accounts: ``errors`` (loadtest's own) ends a run whose
endpoint is failing instead of letting it run out its hour. A rule declares its keys,
how it reads its table, how its settings split over workers (a count is a share of the
run's; a share of requests is not), what it looks at, and whether its firing fails the
run's gate (an error budget spent) or is a normal end (a token budget used up).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

from loadtest.config.toml_tables import Table
from loadtest.errors import UsageError
from loadtest.registry import Registry

__all__ = [
    "STOP_RULES",
    "RunSoFar",
    "StopRule",
    "StopRuleSpec",
    "TrendSample",
    "parse_stop_rules",
]


class TrendSample(NamedTuple):
    """One measured request as it ended: when, the requests then in flight, and its
    time to first token from its intended send (None: no first token)."""

    end_s: float
    """Seconds since the measured window began."""
    in_flight: int
    ttft_ms: float | None


@dataclass(frozen=True, slots=True)
class RunSoFar:
    """What a stop rule looks at: one process's measured requests so far."""

    elapsed_s: float
    """Seconds since the measured window began (after the warm-up)."""
    ended: int
    """Measured requests accounted (each with exactly one outcome)."""
    ok: int
    failed: int
    output_tokens: int
    """Output tokens of the measured ok requests."""
    recent: Sequence[TrendSample] = ()
    """The last minute's measured requests, oldest first: a view to read now, not keep."""


@runtime_checkable
class StopRule(Protocol):
    """What a stop rule kind declares (an object, registered by its kind's name)."""

    @property
    def keys(self) -> frozenset[str]:
        """Its table's keys beyond ``kind``."""
        ...

    @property
    def fails(self) -> bool:
        """True: a run it stopped fails its gate (exit 1); False: a normal end."""
        ...

    def parse(self, table: Table) -> object:
        """Its settings from its table (errors through ``table.fail``)."""
        ...

    def share(self, settings: Any, worker: int, workers: int) -> object:
        """Worker ``worker`` of ``workers``'s settings (each judges its own requests)."""
        ...

    def reached(self, settings: Any, seen: RunSoFar) -> str | None:
        """Why the run stops now, in words with the figures; None: it goes on. Called
        after each measured request is accounted: keep it cheap."""
        ...


STOP_RULES: Registry[StopRule] = Registry(
    "loadtest.stops", "stop rule", protocol=StopRule, error=UsageError
)


@dataclass(frozen=True, slots=True)
class StopRuleSpec:
    """One ``[[load.stop]]`` table: its kind and the settings its kind read."""

    kind: str
    settings: object

    def rule(self) -> StopRule:
        """The registered kind (loaded once)."""
        return STOP_RULES.load(self.kind)


def parse_stop_rules(load: Table) -> tuple[StopRuleSpec, ...]:
    """The ``[[load.stop]]`` tables of ``[load]``, each read by its kind."""
    raw: Sequence[Any] = load.get("stop", list, [], "an array of [[load.stop]] tables")
    rules = []
    for i, item in enumerate(raw):
        t = Table(item, load.path, load.key(f"stop[{i}]"))
        kind = t.get("kind", str, None, "a stop rule kind")
        if kind is None:
            known = ", ".join(STOP_RULES.names()) or "none"
            raise t.fail("kind", f"a stop rule needs a kind (known: {known})")
        try:
            rule = STOP_RULES.load(kind)
        except UsageError as exc:
            raise t.fail("kind", str(exc)) from exc
        settings = rule.parse(t)
        t.finish(rule.keys | {"kind"})
        rules.append(StopRuleSpec(kind, settings))
    return tuple(rules)
