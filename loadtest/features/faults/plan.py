"""The ``[faults]``, ``[target]`` and ``[sim]`` tables of a scenario, validated and frozen.

A fault plan is a timeline of events, each a window from ``at_s`` (seconds after the
run's start) lasting ``duration_s``; every window gets its own verdict. An event's keys
beyond the common ones are its kind's: the kind (a plugin found by name, ``registry``)
declares them and checks them (``FaultTable.parse``).
"""

from __future__ import annotations

import dataclasses
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from loadtest.config.toml_tables import Table
from loadtest.errors import ScenarioError, UsageError
from loadtest.features.faults.event import FaultEvent
from loadtest.features.faults.registry import fault_kinds, fault_table

__all__ = [
    "FaultEvent",
    "FaultPlan",
    "SimSpec",
    "TargetSpec",
    "parse_faults",
    "parse_sim",
    "parse_target",
]

_COMMON_KEYS = frozenset({"kind", "at_s", "duration_s", "name", "max_failures"})


@dataclass(frozen=True, slots=True)
class FaultPlan:
    """The timeline of faults and how their windows are judged."""

    events: tuple[FaultEvent, ...] = ()
    max_degradation: float = 3.0
    """A window holds when its p95 TTFT and TPOT stay within this factor of before."""
    recovery_tolerance: float = 0.10
    """Recovered = median latency back within this share of the level before."""
    proxy_listen: str = "127.0.0.1:0"
    proxy_upstream: str | None = None
    """host:port of the draft server behind the fault proxy (your own deployment)."""
    metrics_url: str | None = None
    """Prometheus endpoint to poll (default: the endpoint's /metrics)."""
    dcgm_url: str | None = None
    """A DCGM exporter's /metrics for GPU memory and power."""
    scrape_interval_s: float = 1.0

    @property
    def needs_proxy(self) -> bool:
        """True when some event acts on the fault proxy (a draft-network toxic)."""
        return any(fault_table(e.kind).runs.needs_proxy for e in self.events)

    @property
    def extra_sessions(self) -> int:
        """Requests the events may send at once beyond the load's concurrency (bursts)."""
        return sum(e.spec.extra_sessions for e in self.events)


@dataclass(frozen=True, slots=True)
class TargetSpec:
    """An endpoint loadtest manages: started before the run, restarted on the timeline."""

    command: tuple[str, ...]
    ready_url: str
    endpoint: str
    ready_timeout_s: float = 120.0
    stop_timeout_s: float = 10.0


@dataclass(frozen=True, slots=True)
class SimSpec:
    """The built-in simulator's setup: speculative or not, and any SimConfig settings."""

    speculative: bool = False
    settings: dict[str, Any] = field(default_factory=dict)


def parse_faults(t: Table) -> FaultPlan:
    """The ``[faults]`` table."""
    raw_events = t.get("events", list, [], "an array of [[faults.events]] tables")
    events = tuple(
        _event(Table(e, t.path, f"{t.key('events')}[{i}]")) for i, e in enumerate(raw_events)
    )
    plan = FaultPlan(
        events=tuple(sorted(events, key=lambda e: e.at_s)),
        max_degradation=_num(t, "max_degradation", 3.0, strict=True),
        recovery_tolerance=_num(t, "recovery_tolerance", 0.10),
        proxy_listen=_hostport(t, "proxy_listen", "127.0.0.1:0") or "127.0.0.1:0",
        proxy_upstream=_hostport(t, "proxy_upstream", None),
        metrics_url=t.get("metrics_url", str, None, "a URL"),
        dcgm_url=t.get("dcgm_url", str, None, "a URL"),
        scrape_interval_s=_num(t, "scrape_interval_s", 1.0, strict=True),
    )
    t.finish()
    return plan


def _event(t: Table) -> FaultEvent:
    kind = t.choice("kind", "", fault_kinds())
    try:
        plugin = fault_table(kind)
    except UsageError as exc:
        raise t.fail("kind", str(exc)) from exc
    ev = FaultEvent(
        kind=kind,
        at_s=_num(t, "at_s", 0.0),
        duration_s=_num(t, "duration_s", 0.0),
        name=t.get("name", str, "", "a string"),
        max_failures=t.integer("max_failures", 0) or 0,
    )
    t.finish(_COMMON_KEYS | plugin.keys)
    return dataclasses.replace(ev, spec=plugin.parse(t, ev))


def parse_target(t: Table) -> TargetSpec:
    """The ``[target]`` table: the command that starts the endpoint and its readiness URL."""
    raw = t.get("command", (str, list), None, "a command (string or list of strings)")
    if raw is None:
        raise t.fail("command", "a managed target needs the command that starts it")
    command = tuple(shlex.split(raw)) if isinstance(raw, str) else tuple(raw)
    if not command or not all(isinstance(c, str) for c in command):
        raise t.fail("command", "expected a non-empty command")
    ready_url = t.get("ready_url", str, None, "a URL")
    if ready_url is None:
        raise t.fail("ready_url", "a managed target needs a readiness URL (e.g. .../health)")
    parts = urlsplit(ready_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise t.fail("ready_url", f"expected an http(s) URL, got {ready_url!r}")
    endpoint = t.get("endpoint", str, f"{parts.scheme}://{parts.netloc}", "a base URL")
    spec = TargetSpec(
        command=command,
        ready_url=ready_url,
        endpoint=endpoint,
        ready_timeout_s=_num(t, "ready_timeout_s", 120.0, strict=True),
        stop_timeout_s=_num(t, "stop_timeout_s", 10.0, strict=True),
    )
    t.finish()
    return spec


def parse_sim(t: Table) -> SimSpec:
    """The ``[sim]`` table: ``speculative`` plus any setting of ``loadtest sim``."""
    from loadtest.sim.model import SimConfig
    from loadtest.sim.profile import read_profile

    speculative = t.get("speculative", bool, False, "true or false")
    known = {f.name: f for f in dataclasses.fields(SimConfig)}
    defaults = SimConfig()
    settings: dict[str, Any] = {}
    for name, value in t.data.items():
        if name == "speculative":
            continue
        if name not in known or name in ("role", "draft_url"):
            raise t.fail(name, "unknown simulator setting (see `loadtest sim --help`)")
        if name == "profile" and isinstance(value, str):
            # Relative to the scenario file, like every path in it; read now, so that a
            # bad profile is an error before the run.
            value = str(Path(t.path).parent / value) if not Path(value).is_absolute() else value
            read_profile(value)
        default = getattr(defaults, name)
        kind: tuple[type, ...] = (int, float) if isinstance(default, float) else (type(default),)
        if isinstance(value, bool) != isinstance(default, bool) or not isinstance(value, kind):
            raise t.fail(name, f"expected a {type(default).__name__}, got {value!r}")
        settings[name] = (
            float(value) if isinstance(value, int | float) and isinstance(default, float) else value
        )
    try:
        dataclasses.replace(defaults, **settings).check()
    except UsageError as exc:
        raise ScenarioError(t.path, t.prefix, str(exc)) from exc
    return SimSpec(speculative=speculative, settings=settings)


def _num(t: Table, name: str, default: float, *, strict: bool = False) -> float:
    v = t.number(name, default, strict=strict)
    assert v is not None
    return v


def _hostport(t: Table, name: str, default: str | None) -> str | None:
    v = t.get(name, str, default, "host:port")
    if v is None:
        return None
    host, sep, port = v.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise t.fail(name, f"expected host:port, got {v!r}")
    return v  # type: ignore[no-any-return]
