"""Fault injection: the plan (``[faults]``), the TCP fault proxy, the managed target,
hook actions, the rig that plays the timeline beside a run, and the verdicts."""

from loadtest.features.faults.plan import FaultEvent, FaultPlan, TargetSpec
from loadtest.features.faults.proxy import FaultProxy, Toxic
from loadtest.features.faults.rig import FaultRig

__all__ = ["FaultEvent", "FaultPlan", "FaultProxy", "FaultRig", "TargetSpec", "Toxic"]
