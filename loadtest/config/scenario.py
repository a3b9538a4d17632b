"""Scenario files: TOML in, a validated frozen ``Scenario`` out.

Every error names the file, the dotted key and what was expected, and unknown keys are
errors (a typo such as ``concurency`` must not silently fall back to a default).
"""

from __future__ import annotations

import ipaddress
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from loadtest.config.arrivals import ARRIVALS, Param, arrival_modes, read_params
from loadtest.config.auth_table import DEFAULT_KEY_ENV, AuthSpec
from loadtest.config.feature_specs import AGENT, FAULTS, SIM, TARGET, TASKS
from loadtest.config.slo_table import SLOSpec, parse_slo_table
from loadtest.config.source_spec import SourceSpec
from loadtest.config.sources import TypedSource, source_kinds, source_plugin
from loadtest.config.stop_rules import StopRuleSpec, parse_stop_rules
from loadtest.config.tables import TABLES, TableSlot
from loadtest.config.toml_tables import Table, every_unknown_key
from loadtest.config.workload_tables import own_key_names
from loadtest.errors import DatasetError, ScenarioError

__all__ = [
    "RESERVED_SAMPLING",
    "LoadSpec",
    "Scenario",
    "SourceSpec",
    "TimeoutSpec",
    "load_scenario",
    "parse_scenario",
]

RESERVED_SAMPLING = (
    *("model", "messages", "prompt", "stream", "max_tokens", "tools"),
    *("input", "max_output_tokens"),  # the Responses API's names for the same things
)
"""Request keys loadtest sets itself: never taken from ``[sampling]`` or a flag."""

DEFAULT_DURATION_S = 30.0
"""The measured duration of a run whose scenario and flags name no bound."""
APIS = ("chat", "completions", "responses")
_COMMON_SOURCE_KEYS = frozenset({"kind", "category", "weight", "max_tokens"})


@dataclass(frozen=True, slots=True)
class LoadSpec:
    """How requests are offered: closed loop (sessions) or open loop (arrival rate)."""

    mode: str = "closed"
    """``closed``, a registered arrival process (``config.arrivals``), or ``trace``."""
    concurrency: int = 8
    """Sessions in closed loop; the in-flight cap in open loop (0 = no cap)."""
    rate: float = 10.0
    arrival: tuple[tuple[str, Param], ...] = ()
    """The arrival process's own keys and their values (``burstiness`` for ``gamma``)."""
    rate_ceiling: float | None = None
    duration_s: float | None = DEFAULT_DURATION_S
    requests: int | None = None
    warmup_s: float = 0.0
    think_time_ms: float = 0.0
    ramp_up_s: float = 0.0
    """Closed loop: sessions start evenly spread over this many seconds, not all at once."""
    grace_s: float = 10.0
    """On stop, how long in-flight requests may finish before they are cancelled."""
    keepalive: bool = True
    """False: a new connection per request (every request pays connection setup)."""
    source_addresses: tuple[str, ...] = ()
    """Local addresses the connections leave from, in turn (``--source-address``); each
    worker takes its own. Empty: the kernel's choice, one address."""
    trace_offsets_ns: tuple[int, ...] = ()
    """Mode ``trace`` (set by a trace source, not in TOML): the recorded send times."""
    stop_rules: tuple[StopRuleSpec, ...] = ()
    """``[[load.stop]]``: rules that end the run before its bound (``config.stop_rules``)."""


@dataclass(frozen=True, slots=True)
class TimeoutSpec:
    """Per-request timeouts; a request that breaks one fails with class ``timeout``."""

    connect_s: float = 10.0
    first_byte_s: float = 120.0
    between_chunks_s: float = 60.0
    total_s: float = 600.0
    """The longest a request may take from send to end, however it trickles."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A validated scenario; CLI flags override it with ``dataclasses.replace``."""

    name: str
    path: str
    sources: tuple[SourceSpec, ...]
    model: str | None = None
    api: str = "chat"
    stream: bool = True
    max_tokens: int = 256
    max_tokens_override: bool = False
    """``--max-tokens`` was given: ``max_tokens`` wins over every source's and prompt's."""
    sampling: dict[str, Any] = field(default_factory=dict)
    load: LoadSpec = field(default_factory=LoadSpec)
    timeouts: TimeoutSpec = field(default_factory=TimeoutSpec)
    slo: SLOSpec = field(default_factory=SLOSpec)
    seed: int = 0
    description: str = ""
    record_prompts: bool = False
    auth: AuthSpec = field(default_factory=AuthSpec)
    """Where the API key comes from (never the key itself)."""
    bound_defaulted: bool = False
    """True when the scenario named neither a duration nor a request count."""
    tables: tuple[tuple[str, object], ...] = ()
    """The tables features own (``[faults]``, ``[agent]``, a plugin's own...), each as
    its parser made it, by name: read typed through the feature's ``TableSlot``
    (``FAULTS.of(scenario)``), or ``table(name)``."""

    def table(self, name: str) -> object | None:
        """The value a feature's parser made of the table ``name`` (None: not in the file)."""
        return dict(self.tables).get(name)

    def with_table(self, name: str, value: object) -> Scenario:
        """A copy whose table ``name`` holds ``value`` (``TableSlot.put``)."""
        tables = {**dict(self.tables), name: value}
        return replace(self, tables=tuple(sorted(tables.items())))


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ScenarioError(str(p), "", f"cannot read the file ({exc.strerror})") from exc
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(p), "", f"not valid TOML: {exc}") from exc
    return parse_scenario(data, str(p), base_dir=p.parent)


def parse_scenario(data: dict[str, Any], path: str, base_dir: Path | None = None) -> Scenario:
    """Validate the TOML table of a scenario; ``path`` is used in error messages, which
    name every unknown key of the file at once."""
    with every_unknown_key():
        return _parse_scenario(data, path, base_dir)


def _parse_scenario(data: dict[str, Any], path: str, base_dir: Path | None) -> Scenario:
    base = base_dir or Path(".")
    top = Table(data, path, "")
    name = top.get("name", str, Path(path).stem, "a string")
    sources_raw = top.get("sources", list, None, "an array of [[sources]] tables")
    # A table that is not there takes its default without loading its feature.
    tables: dict[str, object] = {}
    if "agent" in data:
        tables["agent"] = AGENT.parse(top, base)
        tables["tasks"] = TASKS.parse(top, base)
        if sources_raw:
            raise ScenarioError(
                path, "sources", "an agent scenario takes [[tasks]], not [[sources]]"
            )
        sources_raw = []
    elif "tasks" in data:
        raise ScenarioError(path, "tasks", "[[tasks]] needs an [agent] table (agent sessions)")
    elif not sources_raw:
        raise ScenarioError(path, "sources", "at least one [[sources]] table is required")
    sources = tuple(_source(s, path, f"sources[{i}]", base) for i, s in enumerate(sources_raw))
    model = top.get("model", str, None, "a string")
    api = top.choice("api", "chat", APIS)
    stream = top.get("stream", bool, True, "true or false")
    max_tokens = top.integer("max_tokens", 256, minimum=1)
    seed = top.integer("seed", 0)
    description = top.get("description", str, "", "a string")
    record_prompts = top.get("record_prompts", bool, False, "true or false")
    sampling = dict(top.get("sampling", dict, {}, "a table of sampling fields"))
    for reserved in RESERVED_SAMPLING:
        if reserved in sampling:
            raise ScenarioError(
                path, f"sampling.{reserved}", "is set by loadtest; use the top-level key"
            )
    load = _load(top.sub("load"))
    timeouts = _timeouts(top.sub("timeouts"))
    slo = parse_slo_table(top.sub("slo"))
    for slot in (FAULTS, TARGET, SIM):
        if slot.name in data:
            tables[slot.name] = slot.parse(top, base)
    for secret in _SECRET_KEYS:
        if secret in data:
            raise ScenarioError(path, secret, _NO_SECRETS)
    auth = _auth(top.sub("auth"), base)
    tables.update(_plugin_tables(top, base))
    top.finish()
    assert max_tokens is not None
    assert seed is not None
    return Scenario(
        name=name,
        path=path,
        sources=sources,
        model=model,
        api=api,
        stream=stream,
        max_tokens=max_tokens,
        sampling=sampling,
        load=load,
        timeouts=timeouts,
        slo=slo,
        seed=seed,
        description=description,
        record_prompts=record_prompts,
        auth=auth,
        bound_defaulted=not ({"duration_s", "requests"} & set(data.get("load", {}))),
        tables=tuple(sorted(tables.items())),
    )


def _plugin_tables(top: Table, base: Path) -> tuple[tuple[str, object], ...]:
    """Every top-level key nothing above read whose name a table parser is registered
    under: a plugin's table, parsed by the plugin (its errors name file, table, key). A
    key with no parser stays unread, for ``finish`` to name as unknown."""
    names = sorted(n for n in top.data if n not in top.used and n in TABLES)
    found = []
    for name in names:
        found.append((name, TableSlot(name, object).parse(top, base)))
        top.used.add(name)
    return tuple(found)


def _source(raw: Any, path: str, prefix: str, base: Path) -> SourceSpec:
    t = Table(raw, path, prefix)
    kind = t.choice("kind", "", source_kinds())
    try:
        plugin = source_plugin(kind)
    except DatasetError as exc:  # a plugin that is installed but broken
        raise t.fail("kind", str(exc)) from exc
    category = t.get("category", str, kind, "a string")
    weight = t.number("weight", _SOURCE.weight, strict=True)
    max_tokens = t.integer("max_tokens", None, minimum=1)
    path_value = t.get("path", str, None, "a file path")
    if plugin.needs_path and path_value is None:
        raise t.fail("path", f"a {kind} source needs a path")
    file_path = None
    if path_value is not None:
        file_path = Path(path_value)
        if not file_path.is_absolute():
            file_path = base / file_path
    own = plugin.parse_keys(t, base) if isinstance(plugin, TypedSource) else None
    held = _SPEC_KEYS if own is None else _SPEC_KEYS | own_key_names(type(own))
    spec = SourceSpec(
        kind=kind,
        category=category,
        weight=_f(weight),
        max_tokens=max_tokens,
        path=file_path,
        subsets=t.strings("subsets"),
        languages=t.strings("languages"),
        exclude_languages=t.strings("exclude_languages"),
        min_prompt_chars=_i(t.integer("min_prompt_chars", _SOURCE.min_prompt_chars)),
        max_prompt_chars=_i(t.integer("max_prompt_chars", _SOURCE.max_prompt_chars, minimum=1)),
        limit=t.integer("limit", None, minimum=1),
        prompts=t.strings("prompts"),
        own_keys=own,
        options=tuple((key, t.data[key]) for key in sorted(plugin.keys - held) if key in t.data),
    )
    t.finish(_COMMON_SOURCE_KEYS | plugin.keys)
    return spec


def _load(t: Table) -> LoadSpec:
    wanted = t.data.get("mode")
    off = ARRIVALS.turned_off(wanted) if isinstance(wanted, str) else None
    if off:
        raise t.fail("mode", off)
    mode = t.choice("mode", _LOAD.mode, ("closed", *arrival_modes()))
    duration = t.number("duration_s", None, strict=True)
    requests = t.integer("requests", None, minimum=1)
    if duration is None and requests is None:
        duration = DEFAULT_DURATION_S
    spec = LoadSpec(
        mode=mode,
        # Open loop: no in-flight cap unless asked (0), whatever the closed-loop default.
        concurrency=_i(t.integer("concurrency", _LOAD.concurrency if mode == "closed" else 0)),
        rate=_f(t.number("rate", _LOAD.rate, strict=True)),
        arrival=read_params(t, mode) if mode != "closed" else (),
        rate_ceiling=t.number("rate_ceiling", None, strict=True),
        duration_s=duration,
        requests=requests,
        warmup_s=_f(t.number("warmup_s", _LOAD.warmup_s)),
        think_time_ms=_f(t.number("think_time_ms", _LOAD.think_time_ms)),
        ramp_up_s=_f(t.number("ramp_up_s", _LOAD.ramp_up_s)),
        grace_s=_f(t.number("grace_s", _LOAD.grace_s)),
        keepalive=t.get("keepalive", bool, _LOAD.keepalive, "true or false"),
        source_addresses=_addresses(t),
        stop_rules=parse_stop_rules(t),
    )
    if mode == "closed" and spec.concurrency < 1:
        raise t.fail("concurrency", "closed loop needs concurrency >= 1")
    t.finish()
    return spec


def _addresses(t: Table) -> tuple[str, ...]:
    # The syntax here; whether each is bindable on this machine is the run's check
    # (loadtest.transport.sources), made before any load.
    out = []
    for text in t.strings("source_addresses"):
        try:
            out.append(str(ipaddress.ip_address(text.strip())))
        except ValueError:
            raise t.fail(
                "source_addresses", f"expected IP addresses such as 127.0.0.2, got {text!r}"
            ) from None
    return tuple(out)


_SECRET_KEYS = ("api_key", "key", "token", "password", "bearer")
_NO_SECRETS = (
    "a key never goes in a scenario file (scenarios get committed and shared); put it in "
    "$OPENAI_API_KEY, or name another variable with [auth] api_key_env, or a file with "
    "[auth] api_key_file"
)


def _auth(t: Table, base: Path) -> AuthSpec:
    for secret in _SECRET_KEYS:
        if secret in t.data:
            raise t.fail(secret, _NO_SECRETS)
    env = t.get("api_key_env", str, DEFAULT_KEY_ENV, "the name of an environment variable")
    if not env or "=" in env or "\0" in env:
        raise t.fail("api_key_env", f"expected the name of an environment variable, got {env!r}")
    file = t.get("api_key_file", str, None, "a file path")
    t.finish()
    return AuthSpec(api_key_env=env, api_key_file=str(base / file) if file else None)


def _timeouts(t: Table) -> TimeoutSpec:
    spec = TimeoutSpec(
        connect_s=_f(t.number("connect_s", _TIMEOUTS.connect_s, strict=True)),
        first_byte_s=_f(t.number("first_byte_s", _TIMEOUTS.first_byte_s, strict=True)),
        between_chunks_s=_f(t.number("between_chunks_s", _TIMEOUTS.between_chunks_s, strict=True)),
        total_s=_f(t.number("total_s", _TIMEOUTS.total_s, strict=True)),
    )
    t.finish()
    return spec


_SPEC_KEYS = frozenset({f.name for f in fields(SourceSpec)} - {"own_keys", "options"})
"""Source keys that land in a field of ``SourceSpec``, not in ``options``."""

# Each key's default is its dataclass field's: written once, there.
_LOAD = LoadSpec()
_TIMEOUTS = TimeoutSpec()
_SOURCE = SourceSpec(kind="", category="")


def _f(v: float | None) -> float:
    assert v is not None
    return v


def _i(v: int | None) -> int:
    assert v is not None
    return v
