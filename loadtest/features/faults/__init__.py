"""Fault injection: the plan (``[faults]``), the fault kinds (plugins: ``kind`` declares
what one is, ``registry`` finds them, ``kinds/`` holds loadtest's own), the TCP fault
proxy, the managed target, hook actions, the rig that plays the timeline beside a run,
and the verdicts.

The names below are imported on first use (PEP 562): reading a scenario imports
``plan`` alone, and the rig would pull in aiohttp and numpy (a noticeable part of the
start-up; docs/benchmarks.md) for nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loadtest.features.faults.plan import FaultEvent, FaultPlan, TargetSpec
    from loadtest.features.faults.proxy import FaultProxy, Toxic
    from loadtest.features.faults.rig import FaultRig

__all__ = ["FaultEvent", "FaultPlan", "FaultProxy", "FaultRig", "TargetSpec", "Toxic"]

_HOME = {
    "FaultEvent": "plan",
    "FaultPlan": "plan",
    "TargetSpec": "plan",
    "FaultProxy": "proxy",
    "Toxic": "proxy",
    "FaultRig": "rig",
}


def __getattr__(name: str) -> object:
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
