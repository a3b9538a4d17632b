"""The built-in simulated OpenAI-compatible endpoint."""

from loadtest.sim.model import SimConfig
from loadtest.sim.process import InProcessSim, SimProcess

__all__ = ["InProcessSim", "SimConfig", "SimProcess"]
