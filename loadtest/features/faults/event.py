"""A fault event as the plan holds it, and what a kind declares of it as plain data.

Kept apart from the plugin protocol (``kind.py``), whose types reach into the engine and
the transport: reading a scenario needs only these. The event and a kind's settings are
the scenario's own values (``config.feature_specs``); ``Runs`` is the kind's declaration.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadtest.config.feature_specs import FaultEvent, FaultSpec

__all__ = ["COORDINATOR", "IN_LOAD", "FaultEvent", "FaultSpec", "Runs"]


@dataclass(frozen=True, slots=True)
class Runs:
    """Where a kind acts when the load is scaled out, and what it needs to act at all."""

    in_load: bool = False
    """It has a part in every process that sends load (``load_part``: each worker runs
    its own, beside the rig's action on the coordinator)."""
    holds_load: bool = False
    """The load holds in every process while it acts (a restarted target is down): the
    coordinator tells local workers through a file, Ray tasks through its control actor."""
    needs_target: bool = False
    """It acts on a target loadtest manages (``[target]`` or the simulator)."""
    needs_proxy: bool = False
    """It acts on the fault proxy in front of a draft."""


COORDINATOR = Runs()
"""Acts once per run, in the rig (on the coordinator of a run with workers)."""
IN_LOAD = Runs(in_load=True)
"""Acts in every process that sends load too."""
