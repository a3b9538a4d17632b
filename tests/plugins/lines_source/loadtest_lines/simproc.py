"""An ``ab`` side type plugin: ``simproc:fast``, ``simproc:slow`` or ``simproc:spec``, a
server process that ab starts, measures and stops for every run of the side.

The server is loadtest's simulator run as a command (``python -m loadtest sim``), as any
engine's server would be: a third party names its own command, the model it serves and
how long it may take to stop; loadtest finds a free port, times the cold start, samples
its memory through the run, stops it and writes ``deployment.json``. ``fast`` writes a
token a millisecond, ``slow`` one every 8, ``spec`` is a speculative deployment (a draft
process beside it) at 8 ms a verify step. The type says what ``ab`` asks of it beyond
its start: whether a side speculates, its draft length (``--draft-max``, the simulator's
``spec_k``) and the one setting ``--server-sweep`` may vary (``itl_ms``).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass

from loadtest.plugins import Launch, SideTypeBase, UsageError

_ITL_MS = {"fast": 1.0, "slow": 8.0, "spec": 8.0}


@dataclass(frozen=True, slots=True)
class SimProcSettings:
    itl_ms: float
    spec: bool = False
    spec_k: int | None = None


class SimProc(SideTypeBase):
    """``simproc:fast|slow|spec``."""

    start_cost = "a simulator process's start"
    draft_setting = "the simulator's spec_k (tokens the draft proposes per step)"
    server_settings = ("itl_ms",)

    def parse(self, mode: str, given: str) -> SimProcSettings:
        if mode not in _ITL_MS:
            raise UsageError(f"{given!r}: a simproc side is simproc:fast, slow or spec")
        return SimProcSettings(_ITL_MS[mode], spec=mode == "spec")

    def launch(self, settings: SimProcSettings, host: str, port: int) -> Launch:
        command = [sys.executable, "-m", "loadtest", "sim", "--host", host, "--port", str(port)]
        command += ["--itl-ms", str(settings.itl_ms), "--ttft-ms", "2"]
        if settings.spec:
            command += ["--spec"]
        if settings.spec_k is not None:
            command += ["--spec-k", str(settings.spec_k)]
        return Launch(tuple(command), "sim-llm", 5.0)

    def speculates(self, settings: SimProcSettings) -> bool:
        return settings.spec

    def with_draft_max(self, settings: SimProcSettings, k: int) -> SimProcSettings | None:
        return dataclasses.replace(settings, spec_k=k) if settings.spec else None

    def with_setting(self, settings: SimProcSettings, name: str, value: float) -> SimProcSettings:
        if name != "itl_ms":
            raise UsageError("simproc sides take itl_ms")
        if not 0 < value <= 100:
            raise UsageError("itl_ms from 0 to 100")
        return dataclasses.replace(settings, itl_ms=value)


SIMPROC = SimProc()
