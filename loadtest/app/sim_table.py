"""The ``[sim]`` table: how the built-in simulator is set up when no endpoint is given.

Its keys are the simulator's own settings (``SimConfig``), checked against the simulator
itself; only the application layer may import the simulator, so the table's check lives
here and is registered by name (``loadtest.tables``), as a feature's table is.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from loadtest.config.feature_specs import SimSpec
from loadtest.config.toml_tables import Table
from loadtest.errors import ScenarioError, UsageError

__all__ = ["parse_sim", "sim_table"]


def sim_table(top: Table, base: Path) -> SimSpec:
    """The ``[sim]`` table of scenario ``top`` (registered as ``sim``)."""
    return parse_sim(top.sub("sim"))


def parse_sim(t: Table) -> SimSpec:
    """The ``[sim]`` table: ``speculative`` plus any setting of ``loadtest sim``."""
    # Imported here: a scenario without [sim] does not load the simulator's model.
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
