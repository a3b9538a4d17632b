"""A summary block plugin: ``lines`` in summary.json, a tally of the requests a ``lines``
source sent, each prompt's count and the answers' tokens.

It declares its typed model (in the schema and checked on read), the hook that feeds it
in every process that sends load, how the processes' parts merge (counts summed) and
its line of the printed report and its panel on the dashboard (live, from the
hook's parts so far, and in a replay). It also owns a scenario table of its own, ``[lines]``
(``label``: a name the block and its line carry), parsed by ``lines_table`` and read back
with its ``TableSlot`` (``LINES.of(scenario)``). Nothing here is part of loadtest: it uses only the
plugin interface a third party sees (docs/plugins.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from loadtest.plugins import (
    BlockBase,
    HookResult,
    Metrics,
    RequestRecord,
    RunHook,
    Scenario,
    Summary,
    Table,
    TableSlot,
)


class LinesPart(TypedDict):
    """What one process counted (its hook's part)."""

    sent: int
    ok: int
    output_tokens: int
    by_prompt: dict[str, int]
    """Requests sent of each line (its prompt id)."""
    label: str
    """The ``[lines]`` table's ``label`` ("" without one)."""


class LinesTally(LinesPart):
    """The ``lines`` block: every process's part added."""

    measured_ok: int
    """The run's own count of measured ok requests, read from the merged metrics."""


@dataclass(frozen=True)
class LinesTable:
    """The ``[lines]`` table."""

    label: str


LINES = TableSlot("lines", LinesTable, lambda: LinesTable(""))
"""The ``[lines]`` table, read typed: ``LINES.of(scenario)`` (its default without one)."""


def lines_table(top: Table, base: Path) -> LinesTable:
    """The parser of ``[lines]``, registered in ``loadtest.tables``."""
    t = top.sub("lines")
    label = t.get("label", str, "", "a string")
    if len(label) > 40:
        raise t.fail("label", f"a label of at most 40 characters, got {len(label)}")
    t.finish()
    return LinesTable(label)


class _Count(RunHook):
    def __init__(self, label: str) -> None:
        self.label = label
        self.sent = self.ok = self.tokens = 0
        self.by_prompt: dict[str, int] = {}

    def on_record(self, rec: RequestRecord) -> None:
        self.sent += 1
        self.by_prompt[rec.prompt_id] = self.by_prompt.get(rec.prompt_id, 0) + 1
        if rec.outcome == "ok":
            self.ok += 1
            self.tokens += rec.output_tokens

    def result(self, run_dir: Path) -> HookResult:
        return HookResult(blocks={"lines": self._part()})

    def live_parts(self) -> dict[str, LinesPart]:
        # The dashboard's panel while the run goes: the same part, so far.
        return {"lines": self._part()}

    def _part(self) -> LinesPart:
        return {
            "sent": self.sent,
            "ok": self.ok,
            "output_tokens": self.tokens,
            "by_prompt": dict(self.by_prompt),
            "label": self.label,
        }


class Lines(BlockBase):
    """The ``lines`` block."""

    model = LinesTally

    def hook(self, scenario: Scenario) -> RunHook | None:
        if not any(s.kind == "lines" for s in scenario.sources):
            return None
        return _Count(LINES.of(scenario).label)

    def merge(self, parts: Sequence[LinesPart], metrics: Metrics) -> LinesTally:
        by_prompt: dict[str, int] = {}
        for p in parts:
            for prompt, n in p["by_prompt"].items():
                by_prompt[prompt] = by_prompt.get(prompt, 0) + n
        return {
            "sent": sum(p["sent"] for p in parts),
            "ok": sum(p["ok"] for p in parts),
            "output_tokens": sum(p["output_tokens"] for p in parts),
            "by_prompt": dict(sorted(by_prompt.items())),
            "label": parts[0]["label"],
            "measured_ok": metrics.measured_ok,
        }

    def render(self, block: LinesTally, summary: Summary) -> str | None:
        named = f" ({block['label']})" if block["label"] else ""
        return (
            f"lines{named}: {block['ok']}/{block['sent']} ok over {len(block['by_prompt'])} lines, "
            f"{block['output_tokens']} output tokens"
        )

    def panel(self, block: LinesTally) -> str | None:
        busiest = max(block["by_prompt"].items(), key=lambda kv: kv[1], default=("-", 0))
        return (
            f"lines: {block['ok']}/{block['sent']} ok, {block['output_tokens']} tokens\n"
            f"busiest line {busiest[0]} ({busiest[1]} sent)"
        )


LINES_TALLY = Lines()
