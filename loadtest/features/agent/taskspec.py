"""The ``[agent]`` and ``[[tasks]]`` tables of an agent scenario: their checks, registered
by name (``loadtest.tables``); their values are the scenario's (``config.feature_specs``)."""

from __future__ import annotations

import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadtest.config.feature_specs import AgentSpec, TaskSource
from loadtest.config.toml_tables import Table

if TYPE_CHECKING:
    from loadtest.features.agent.tasks import Task

__all__ = [
    "AgentSpec",
    "TaskPool",
    "TaskSource",
    "agent_table",
    "build_tasks",
    "parse_agent",
    "parse_tasks",
    "tasks_table",
]

TOOL_MODES = ("fixed", "lognormal", "url")
TASK_KINDS = ("bfcl-multi-turn", "agent-jsonl")


def agent_table(top: Table, base: Path) -> AgentSpec:
    """The ``[agent]`` table of scenario ``top`` (registered as ``agent``)."""
    return parse_agent(top.sub("agent"))


def tasks_table(top: Table, base: Path) -> tuple[TaskSource, ...]:
    """The ``[[tasks]]`` tables of scenario ``top`` (registered as ``tasks``)."""
    top.used.add("tasks")
    return parse_tasks(top.data.get("tasks"), top.path, base)


def parse_agent(t: Table) -> AgentSpec:
    """The ``[agent]`` table."""
    tool = t.choice("tool", "lognormal", TOOL_MODES)
    url = t.get("tool_url", str, None, "an http:// URL")
    if tool == "url" and not url:
        raise t.fail("tool_url", "tool = 'url' needs tool_url, the address tool calls go to")
    spec = AgentSpec(
        max_steps=t.integer("max_steps", 12, minimum=1) or 12,
        max_retries=t.integer("max_retries", 2, minimum=0) or 0,
        tool=tool,
        tool_ms=t.number("tool_ms", 50.0) or 0.0,
        tool_sigma=t.number("tool_sigma", 0.5) or 0.0,
        tool_url=url,
        tool_timeout_s=t.number("tool_timeout_s", 10.0, strict=True) or 10.0,
    )
    t.finish()
    return spec


def parse_tasks(raw: Any, path: str, base: Path) -> tuple[TaskSource, ...]:
    """The ``[[tasks]]`` tables (paths relative to the scenario file)."""
    if not isinstance(raw, list) or not raw:
        top = Table({}, path, "")
        raise top.fail("tasks", "an agent scenario needs at least one [[tasks]] table")
    out = []
    for i, item in enumerate(raw):
        t = Table(item, path, f"tasks[{i}]")
        kind = t.choice("kind", "bfcl-multi-turn", TASK_KINDS)
        file = t.get("path", str, None, "a file path")
        if kind == "agent-jsonl" and not file:
            raise t.fail("path", "agent-jsonl needs the path of a JSONL file of sessions")
        out.append(
            TaskSource(
                kind=kind,
                category=t.get("category", str, "agent", "a string"),
                weight=t.number("weight", 1.0, strict=True) or 1.0,
                subsets=t.strings("subsets"),
                path=str(base / file) if file else None,
                limit=t.integer("limit", None, minimum=1),
            )
        )
        t.finish()
    return tuple(out)


class TaskPool:
    """Draws tasks: a source by weight, then a task of it, seeded."""

    def __init__(self, groups: list[tuple[float, list[Task]]], seed: int) -> None:
        self._groups = [(w, ts) for w, ts in groups if ts]
        self._rng = random.Random(seed)
        self.size = sum(len(ts) for _, ts in self._groups)

    def draw(self) -> Task:
        """The next task of the seeded sequence."""
        weights = [w for w, _ in self._groups]
        (_, tasks) = self._rng.choices(self._groups, weights=weights)[0]
        return tasks[self._rng.randrange(len(tasks))]


def build_tasks(sources: tuple[TaskSource, ...], seed: int) -> TaskPool:
    """Load every task source; ``DatasetError`` naming the file or subset on failure."""
    # Imported here: the data loaders import the scenario module, which imports this one.
    from loadtest.features.agent.tasks import load_agent_jsonl, load_bfcl_multi_turn

    groups = []
    for src in sources:
        if src.kind == "bfcl-multi-turn":
            tasks = load_bfcl_multi_turn(src.subsets, src.category, src.limit)
        else:
            assert src.path is not None
            tasks = load_agent_jsonl(Path(src.path), src.category, src.limit)
        groups.append((src.weight, tasks))
    return TaskPool(groups, seed)
