"""A live output plugin: ``--view-log PATH`` appends each view of a run as a JSON line
(the run, its phase, its requests so far, and on the last line the summary's count).

A log a CI job can tail while the run goes. Nothing here is part of loadtest: it uses
only the plugin interface a third party sees (``LiveOutputKind``, ``LiveView``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from loadtest.plugins import LiveView, UsageError


class ViewLog:
    def __init__(self, path: str) -> None:
        self.path = path

    def show(self, view: LiveView, families: Sequence[object]) -> None:
        line = {
            "run": view.run_id,
            "phase": view.phase,
            "sent": sum(view.metrics.outcomes.values()),
            "in_flight": view.in_flight,
            "series": len(families),
            "labels": dict(view.labels),
        }
        if view.summary is not None:
            line["summary_sent"] = view.summary["requests"]["sent"]
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")

    def close(self) -> None:
        return None


@dataclass(frozen=True)
class ViewLogKind:
    flag: str = "--view-log"
    metavar: str = "PATH"
    help: str = "append each view of the run to PATH as a JSON line"

    def open(self, value: str) -> ViewLog:
        if not value.endswith(".jsonl"):
            raise UsageError(f"{self.flag} {value!r}: name a .jsonl file")
        return ViewLog(value)


VIEW_LOG = ViewLogKind()
