"""How the options of one run apply to a scenario.

``RunOptions`` (``app.run_options``) is what the command line (or a Python caller) asks
for; ``None`` means "as the scenario says". ``apply_overrides`` checks the values and
lays them over the scenario, so that flags from Python callers are checked exactly like
the CLI's.
"""

from __future__ import annotations

import dataclasses
import difflib
import ssl
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from loadtest.app.run_options import RunOptions
from loadtest.config.dimensions import DIMENSIONS, closed_at, open_at
from loadtest.config.feature_specs import SIM
from loadtest.config.scenario import LoadSpec, Scenario, TimeoutSpec, load_scenario
from loadtest.config.shipped import resolve_scenario_path
from loadtest.errors import UsageError
from loadtest.features.workload import apply_workload_flags
from loadtest.flag import check_bounds
from loadtest.measure.slo import SLOSpec, parse_slo_flag
from loadtest.transport.auth import AuthSpec, resolve_api_key, tls_context
from loadtest.transport.sources import check_addresses, parse_address

__all__ = [
    "Note",
    "RunOptions",
    "apply_overrides",
    "default_scenario_path",
    "resolve_access",
    "resolve_scenario",
    "scenario_path",
    "start_notes",
]


def default_scenario_path() -> Path:
    """The shipped ``mixed`` scenario (or ``./scenarios/mixed.toml`` where there is one)."""
    return scenario_path("mixed")


def scenario_path(given: str | None) -> Path:
    """The TOML a ``scenario`` argument names: a path, or a shipped scenario's name."""
    return resolve_scenario_path(given)


def _load(load: LoadSpec, o: RunOptions) -> LoadSpec:
    if o.rate is not None:
        load = open_at(load, o.rate)
    elif o.concurrency is not None:
        load = closed_at(load, o.concurrency)
    if o.duration is not None:
        load = dataclasses.replace(load, duration_s=o.duration, requests=None)
    if o.requests is not None:
        # --duration and --requests exclude each other: a count ends the run alone.
        load = dataclasses.replace(load, requests=o.requests, duration_s=None)
    if o.warmup is not None:
        load = dataclasses.replace(load, warmup_s=o.warmup)
    return _sources(load, o)


def _sources(load: LoadSpec, o: RunOptions) -> LoadSpec:
    # Bound once here, before any load: an address that is not this machine's fails
    # with the flag or key named, not as thousands of failed connects.
    if o.source_addresses:
        where = "--source-address"
        given = tuple(parse_address(a, where) for a in o.source_addresses)
        check_addresses(given, where)
        return dataclasses.replace(load, source_addresses=given)
    if load.source_addresses:
        check_addresses(load.source_addresses, "[load] source_addresses")
    return load


def _timeouts(t: TimeoutSpec, o: RunOptions) -> TimeoutSpec:
    if o.timeout is not None:
        t = dataclasses.replace(t, total_s=o.timeout)
    if o.first_byte_timeout is not None:
        t = dataclasses.replace(t, first_byte_s=o.first_byte_timeout)
    if o.chunk_timeout is not None:
        t = dataclasses.replace(t, between_chunks_s=o.chunk_timeout)
    return t


def apply_overrides(sc: Scenario, o: RunOptions) -> Scenario:
    """The scenario with command-line flags applied on top, each checked against the
    bound its flag declares (``RunOptions``), whether it came from the CLI or Python."""
    check_bounds(o)
    sc = dataclasses.replace(sc, load=_load(sc.load, o), timeouts=_timeouts(sc.timeouts, o))
    if o.duration is not None or o.requests is not None:
        # The flag is a bound: a trace replay must stop at it, not at the trace's end.
        sc = dataclasses.replace(sc, bound_defaulted=False)
    if o.model is not None:
        sc = dataclasses.replace(sc, model=o.model)
    if o.max_tokens is not None:
        # The flag is the user's last word: it replaces every source's own value, and
        # ``max_tokens_override`` makes the pool replace every prompt's too.
        sources = tuple(dataclasses.replace(s, max_tokens=o.max_tokens) for s in sc.sources)
        sc = dataclasses.replace(
            sc, max_tokens=o.max_tokens, sources=sources, max_tokens_override=True
        )
    if o.seed is not None:
        sc = dataclasses.replace(sc, seed=o.seed)
    if o.temperature is not None:
        sc = dataclasses.replace(sc, sampling={**sc.sampling, "temperature": o.temperature})
    if o.slo:
        # ``--slo none`` drops the scenario's objectives: a smoke run too short to judge
        # a p99 says so by asking for no verdict, instead of exiting 1 on "cannot tell".
        base = SLOSpec() if "none" in o.slo else sc.slo
        extra = tuple(t for text in o.slo if text != "none" for t in parse_slo_flag(text))
        sc = dataclasses.replace(sc, slo=base.merged(extra))
    if o.stop_saturated and not any(r.kind == "saturated" for r in sc.load.stop_rules):
        from loadtest.config.stop_rules import StopRuleSpec
        from loadtest.config.stop_saturated import DEFAULT

        rule = StopRuleSpec("saturated", DEFAULT)
        sc = dataclasses.replace(
            sc, load=dataclasses.replace(sc.load, stop_rules=(*sc.load.stop_rules, rule))
        )
    if o.sim_speculative is not None:
        sc = SIM.put(sc, dataclasses.replace(SIM.of(sc), speculative=o.sim_speculative))
    if o.sampling:
        sc = dataclasses.replace(sc, sampling={**sc.sampling, **dict(o.sampling)})
    if o.sim_settings:
        settings = {**SIM.of(sc).settings, **dict(o.sim_settings)}
        sc = SIM.put(sc, dataclasses.replace(SIM.of(sc), settings=settings))
    for name, value in o.steps:  # a sweep's step, before the sources' own flags
        sc = DIMENSIONS.load(name).apply(sc, value)
    return apply_workload_flags(sc, o.tokenizer, o.speedup)


def resolve_scenario(options: RunOptions) -> Scenario:
    """The scenario the options name, with the options applied; ``UsageError`` if bad.

    The one place a run's effective scenario is made: every run of ``run``, ``sweep`` and
    ``ab`` (and a worker's share, split from it) starts from what this returns."""
    if options.endpoint is not None:
        url = urllib.parse.urlsplit(options.endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise UsageError(
                f"--endpoint must be an http:// or https:// URL with a host, "
                f"e.g. http://127.0.0.1:8000; got {options.endpoint!r}"
            )
    return apply_overrides(load_scenario(scenario_path(options.scenario)), options)


def resolve_access(
    scenario: Scenario, options: RunOptions
) -> tuple[str | None, ssl.SSLContext | bool]:
    """The API key and the TLS setting, from the options over the scenario's [auth]."""
    tls = tls_context(options.ca_bundle, options.insecure)
    if options.api_key is not None:
        return options.api_key, tls
    spec = AuthSpec(
        api_key_env=options.api_key_env or scenario.auth.api_key_env,
        api_key_file=options.api_key_file or scenario.auth.api_key_file,
    )
    return resolve_api_key(spec), tls


@dataclass(frozen=True, slots=True)
class Note:
    """One thing to tell before the load starts; ``warn`` for what weakens the run."""

    text: str
    warn: bool = False


def start_notes(scenario: Scenario, options: RunOptions, key: str | None) -> list[Note]:
    """What the user should know before the load starts (defaults taken, TLS, key)."""
    load = scenario.load
    notes = []
    # A recorded trace is its own bound: replayed whole, not for the default 30 s.
    replays_whole = any(s.kind in ("trace", "agent-trace") for s in scenario.sources)
    if (
        scenario.bound_defaulted
        and options.duration is None
        and options.requests is None
        and not replays_whole
    ):
        notes.append(
            Note(
                f"no duration or request count given: running {load.duration_s:g} s of load "
                "(set [load] duration_s or requests, or pass --duration or --requests)"
            )
        )
    notes += [Note(text, True) for text in sampling_typos(scenario.sampling)]
    if options.insecure:
        notes.append(Note("--insecure: the endpoint's TLS certificate is NOT verified", True))
    if key is not None:
        source = (
            "given"
            if options.api_key is not None
            else f"file {options.api_key_file or scenario.auth.api_key_file}"
            if options.api_key_file or scenario.auth.api_key_file
            else f"${options.api_key_env or scenario.auth.api_key_env}"
        )
        notes.append(Note(f"API key: from {source}"))
    return notes


REQUEST_FIELDS = frozenset(
    {
        *("temperature", "top_p", "top_k", "min_p", "typical_p", "seed", "stop", "n"),
        *("presence_penalty", "frequency_penalty", "repetition_penalty", "logit_bias"),
        *("logprobs", "top_logprobs", "response_format", "tool_choice", "user"),
        *("parallel_tool_calls", "stream_options", "ignore_eos", "min_tokens"),
        *("reasoning_effort", "reasoning", "chat_template_kwargs", "thinking_budget_tokens"),
        *("structured_outputs", "guided_json", "guided_regex", "guided_grammar", "grammar"),
        *("json_schema", "n_probs", "cache_prompt", "slot_id", "samplers", "mirostat"),
    }
)
"""Request fields of the OpenAI API and of vLLM's and llama.cpp's extensions: a
``[sampling]`` key near one of these, and not one, is most likely a typo of it."""


def sampling_typos(sampling: Mapping[str, object]) -> list[str]:
    """A warning for each ``[sampling]`` key that is not a known request field but is
    close to one: it is sent as written (servers take fields loadtest does not know),
    and a server that ignores unknown fields would run without the setting meant."""
    out = []
    for key in sampling:
        close = difflib.get_close_matches(key, sorted(REQUEST_FIELDS), n=1, cutoff=0.8)
        if key not in REQUEST_FIELDS and close:
            out.append(
                f"[sampling] {key}: not a request field servers know; did you mean "
                f"{close[0]!r}? (sent as written)"
            )
    return out
