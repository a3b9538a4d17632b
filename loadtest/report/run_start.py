"""``run.json``: what a run knows when its load starts, written then, against its death.

summary.json comes at the end of a run. A run killed before it (SIGKILL, the OOM killer,
a CI timeout) leaves requests.jsonl and histograms.hlog, which hold every request it
accounted but not the scenario, the endpoint, the model, the start time or the SLOs.
This record holds those, written atomically once, before the run's clock starts, so that
a summary can be rebuilt from the folder (``loadtest.report.rebuild``).
"""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from loadtest.config.feature_specs import AGENT, FAULTS
from loadtest.engine.hooks import RunHook
from loadtest.model.atomic import write_atomic
from loadtest.model.io import load_run_start
from loadtest.model.summary import RunHead, RunStart
from loadtest.report.summary import SCHEMA_VERSION, run_head

if TYPE_CHECKING:
    from loadtest.config.scenario import Scenario
    from loadtest.engine.runner import RunConfig

__all__ = ["START_FILE", "RunStartHook", "read_run_start", "start_record"]

START_FILE = "run.json"


def start_record(head: RunHead, scenario: Scenario, simulated: bool = False) -> RunStart:
    """The record of a run of ``scenario`` starting in this process."""
    record: RunStart = {
        "schema": SCHEMA_VERSION,
        "run": head,
        # repr: a float read back by parse_slo_flag is the same float.
        "slo": [f"{t.label}={t.limit!r}" for t in scenario.slo.thresholds],
        "fault_windows": [ev.label for ev in FAULTS.of(scenario).events],
        "fault_starts_s": [ev.at_s for ev in FAULTS.of(scenario).events],
        "agent": AGENT.get(scenario) is not None,
        "pid": os.getpid(),
        "host": socket.gethostname(),
    }
    if simulated:
        record["simulated"] = True
    return record


class RunStartHook(RunHook):
    """Writes ``run.json`` of a run before its clock starts (an fsync is no run time)."""

    def __init__(self, config: RunConfig, prompts: dict[str, int]) -> None:
        self.config = config
        self.prompts = prompts

    def before_start(self) -> None:
        """Write the record; the start time is this moment, to the second."""
        cfg = self.config
        head = run_head(
            cfg.scenario,
            run_id=cfg.run_dir.name,
            endpoint=cfg.endpoint,
            model=cfg.model,
            started_wall=time.time(),
            prompts=self.prompts,
        )
        cfg.run_dir.mkdir(parents=True, exist_ok=True)
        record = start_record(head, cfg.scenario, cfg.simulated)
        write_atomic(cfg.run_dir / START_FILE, orjson.dumps(record, option=orjson.OPT_INDENT_2))


def read_run_start(folder: Path) -> RunStart | None:
    """The folder's start record, None when it has none (``ResultFileError`` if bad)."""
    path = folder / START_FILE
    return load_run_start(path) if path.exists() else None
