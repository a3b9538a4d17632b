"""The built-in simulated OpenAI-compatible endpoint.

The names below are imported on first use: reading a scenario's ``[sim]`` table imports
``loadtest.sim.model``, and a run against a real endpoint should not pay for the server
(``sim.process`` pulls in aiohttp's server side; its cost is in docs/benchmarks.md).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loadtest.sim.model import SimConfig
    from loadtest.sim.process import InProcessSim, SimProcess

__all__ = ["InProcessSim", "SimConfig", "SimProcess"]

_HOMES = {"SimConfig": "loadtest.sim.model", "InProcessSim": "loadtest.sim.process"}


def __getattr__(name: str) -> object:
    if name not in __all__:
        raise AttributeError(f"module 'loadtest.sim' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES.get(name, "loadtest.sim.process")), name)
