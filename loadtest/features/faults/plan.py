"""The ``[faults]`` and ``[target]`` tables of a scenario, validated into their values.

A fault plan is a timeline of events, each a window from ``at_s`` (seconds after the
run's start) lasting ``duration_s``; every window gets its own verdict. An event's keys
beyond the common ones are its kind's: the kind (a plugin found by name, ``registry``)
declares them and checks them (``FaultTable.parse``). Both tables are registered by
name (``loadtest.tables`` in pyproject.toml), which is how a scenario reads them; their
values are the scenario's types (``config.feature_specs``).
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path
from urllib.parse import urlsplit

from loadtest.config.feature_specs import FaultEvent, FaultPlan, TargetSpec
from loadtest.config.toml_tables import Table
from loadtest.errors import UsageError
from loadtest.features.faults.registry import fault_kinds, fault_table

__all__ = [
    "FaultEvent",
    "FaultPlan",
    "TargetSpec",
    "faults_table",
    "needs_proxy",
    "parse_faults",
    "parse_target",
    "target_table",
]

_COMMON_KEYS = frozenset({"kind", "at_s", "duration_s", "name", "max_failures"})


def needs_proxy(plan: FaultPlan) -> bool:
    """True when some event of ``plan`` acts on the fault proxy (a draft-network toxic)."""
    return any(fault_table(e.kind).runs.needs_proxy for e in plan.events)


def faults_table(top: Table, base: Path) -> FaultPlan:
    """The ``[faults]`` table of scenario ``top`` (registered as ``faults``)."""
    return parse_faults(top.sub("faults"))


def target_table(top: Table, base: Path) -> TargetSpec:
    """The ``[target]`` table of scenario ``top`` (registered as ``target``)."""
    return parse_target(top.sub("target"))


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
