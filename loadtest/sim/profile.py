"""Simulator profiles: a TOML of ``loadtest sim`` settings fitted to a real engine.

``loadtest sim --fit RUN ...`` writes one (``app/engines/twin.py`` does the fitting); ``loadtest
sim --profile FILE`` and a scenario's ``[sim] profile = "FILE"`` serve it. The file has
a ``[sim]`` table (settings, by name, as in a scenario) and a ``[fitted]`` table: the
range of load and prompts the fit saw. Outside that range the twin is an extrapolation,
so the server warns (once per kind) when a request takes it there.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import tomllib
from dataclasses import dataclass
from pathlib import Path

from loadtest.errors import ScenarioError, UsageError
from loadtest.sim.model import SimConfig

__all__ = [
    "FittedRange",
    "RangeWatch",
    "Settings",
    "profile_text",
    "read_profile",
    "with_profile",
]

Settings = dict[str, float | int | bool | str]
"""``loadtest sim`` settings by name, as a profile or a ``[sim]`` table holds them."""

log = logging.getLogger("loadtest.sim")

_NOT_SETTINGS = frozenset({"role", "draft_url", "profile", "reuse_port", "procs", "seed"})
"""Settings a profile does not carry: how a server is run, not how the engine behaves."""


@dataclass(frozen=True, slots=True)
class FittedRange:
    """What the fit saw: running requests, prompt tokens, and where it came from."""

    running: tuple[int, int]
    prompt_tokens: tuple[int, int]
    engine: str = "unknown"
    runs: tuple[str, ...] = ()


def _check_settings(raw: object, path: str) -> Settings:
    if not isinstance(raw, dict):
        raise ScenarioError(path, "sim", "a profile needs a [sim] table of settings")
    defaults = SimConfig()
    known = {f.name for f in dataclasses.fields(SimConfig)} - _NOT_SETTINGS
    settings: Settings = {}
    for name, value in raw.items():
        if name not in known:
            raise ScenarioError(path, f"sim.{name}", "not a setting a profile can carry")
        default = getattr(defaults, name)
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not type(default):
            raise ScenarioError(path, f"sim.{name}", f"expected a {type(default).__name__}")
        settings[name] = value
    try:
        replaced(defaults, settings).check()
    except UsageError as exc:
        raise ScenarioError(path, "sim", str(exc)) from exc
    return settings


def replaced(config: SimConfig, settings: Settings) -> SimConfig:
    """``config`` with ``settings``, each checked against its field's type beforehand."""
    # mypy cannot match a dict of mixed values to SimConfig's fields one by one.
    return dataclasses.replace(config, **settings)  # type: ignore[arg-type]


def _pair(raw: dict[str, object], key: str, path: str) -> tuple[int, int]:
    value = raw.get(key)
    if (
        not isinstance(value, list)
        or len(value) != 2
        or not all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        or value[0] > value[1]
    ):
        raise ScenarioError(path, f"fitted.{key}", "expected [low, high], two integers")
    return value[0], value[1]


def read_profile(path: str | Path) -> tuple[Settings, FittedRange]:
    """The settings and the fitted range of a profile file (errors name file and key)."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text("utf-8"))
    except OSError as exc:
        raise ScenarioError(str(p), "", f"cannot read the profile ({exc.strerror})") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(p), "", f"not valid TOML: {exc}") from exc
    settings = _check_settings(data.get("sim"), str(p))
    fitted = data.get("fitted")
    if not isinstance(fitted, dict):
        raise ScenarioError(str(p), "fitted", "a profile needs a [fitted] table (its range)")
    runs = fitted.get("runs", [])
    fit = FittedRange(
        running=_pair(fitted, "running", str(p)),
        prompt_tokens=_pair(fitted, "prompt_tokens", str(p)),
        engine=str(fitted.get("engine", "unknown")),
        runs=tuple(str(r) for r in runs) if isinstance(runs, list) else (),
    )
    return settings, fit


def with_profile(config: SimConfig, overrides: Settings) -> SimConfig:
    """``config`` with its profile's settings under ``overrides`` (the settings given
    explicitly); unchanged without a profile."""
    if not config.profile:
        return config
    settings, _ = read_profile(config.profile)
    return replaced(config, {**settings, **overrides})


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else "0.0"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    raise TypeError(f"cannot write {v!r} to a profile")


def profile_text(settings: Settings, fitted: FittedRange, notes: list[str]) -> str:
    """The profile as TOML, with the fit's notes as comments above the tables."""
    lines = ["# A simulator profile fitted by `loadtest sim --fit` (serve: loadtest sim --profile)"]
    lines += [f"# {n}" for n in notes]
    lines += ["", "[sim]"]
    lines += [f"{k} = {_value(v)}" for k, v in settings.items()]
    lines += ["", "[fitted]"]
    lines += [
        f"engine = {_value(fitted.engine)}",
        f"running = {_value(list(fitted.running))}",
        f"prompt_tokens = {_value(list(fitted.prompt_tokens))}",
        f"runs = {_value(list(fitted.runs))}",
    ]
    return "\n".join(lines) + "\n"


class RangeWatch:
    """Warns once per kind when the load leaves the range a profile was fitted on."""

    __slots__ = ("_range", "_warned")

    def __init__(self, fitted: FittedRange | None) -> None:
        self._range = fitted
        self._warned: set[str] = set()

    @classmethod
    def of(cls, config: SimConfig) -> RangeWatch:
        """The watch of the config's profile (one that never warns without a profile)."""
        return cls(read_profile(config.profile)[1] if config.profile else None)

    def observe(self, running: int, prompt_tokens: int) -> None:
        """One admitted request: how many run now, and its prompt's tokens."""
        fit = self._range
        if fit is None:
            return
        if running > fit.running[1]:
            self._warn("running", f"{running} requests running, above the fitted {fit.running[1]}")
        low, high = fit.prompt_tokens
        if not low <= prompt_tokens <= high:
            self._warn(
                "prompt", f"a prompt of {prompt_tokens} tokens, outside the fitted {low}-{high}"
            )

    def _warn(self, kind: str, text: str) -> None:
        if kind not in self._warned:
            self._warned.add(kind)
            log.warning("sim: %s: the profile is extrapolated beyond what it was fitted on", text)
