"""Agent tasks: multi-turn sessions from BFCL or from the user's recorded sessions.

A task is a conversation of user turns; in each turn the model is asked, calls tools
(loadtest answers for them), and is asked again until it answers in text. Where the
data knows which calls were expected (BFCL's ground truth, the recorded assistant
calls), they are kept per turn, by function name, to report whether each call matched.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import orjson

from loadtest.datasets.bfcl import _read_lines, bfcl_data_dir, to_json_schema
from loadtest.errors import DatasetError
from loadtest.model.json import JsonObject

__all__ = ["MULTI_TURN_SUBSETS", "Task", "call_name", "load_agent_jsonl", "load_bfcl_multi_turn"]

MULTI_TURN_SUBSETS = (
    "multi_turn_base",
    "multi_turn_long_context",
    "multi_turn_miss_func",
    "multi_turn_miss_param",
)
# BFCL's multi-turn API classes and the files that document their functions.
_CLASS_DOCS = {
    "GorillaFileSystem": "gorilla_file_system.json",
    "MathAPI": "math_api.json",
    "MessageAPI": "message_api.json",
    "TwitterAPI": "posting_api.json",
    "TicketAPI": "ticket_api.json",
    "TradingBot": "trading_bot.json",
    "TravelAPI": "travel_booking.json",
    "VehicleControlAPI": "vehicle_control.json",
}


@dataclass(frozen=True, slots=True)
class Task:
    """One agent task: turns of user messages, the tools offered, what was expected."""

    id: str
    source: str
    category: str
    system: tuple[JsonObject, ...]
    """Messages before the first turn (a system prompt), sent with every request."""
    turns: tuple[tuple[JsonObject, ...], ...]
    """Each turn's user messages, appended when the turn starts."""
    tools: tuple[JsonObject, ...]
    expected: tuple[tuple[str, ...], ...] | None = None
    """Per turn, the names of the expected calls in order (None: not known)."""
    results: tuple[tuple[str, ...], ...] | None = None
    """Per turn, recorded tool results to answer with, in order (None: simulated)."""


def call_name(text: str) -> str:
    """The function name of a BFCL call string such as ``cd(folder='document')``."""
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise DatasetError(f"not a function call: {text!r}") from exc
    if not isinstance(node, ast.Call):
        raise DatasetError(f"not a function call: {text!r}")
    return ast.unparse(node.func)


def _tool(fn: JsonObject) -> JsonObject:
    return {
        "type": "function",
        "function": {
            "name": fn["name"],
            "description": fn.get("description", ""),
            "parameters": to_json_schema(fn.get("parameters") or {"type": "object"}),
        },
    }


def load_bfcl_multi_turn(subsets: tuple[str, ...], category: str, limit: int | None) -> list[Task]:
    """BFCL multi-turn entries as tasks, with the functions of their API classes."""
    data = bfcl_data_dir()
    docs: dict[str, list[JsonObject]] = {}
    tasks: list[Task] = []
    for subset in subsets or ("multi_turn_base",):
        if subset not in MULTI_TURN_SUBSETS:
            raise DatasetError(
                f"bfcl multi-turn subset {subset!r} is unknown; known: "
                + ", ".join(MULTI_TURN_SUBSETS)
            )
        name = f"BFCL_v4_{subset}.json"
        qnode = data.joinpath(name)
        anode = data.joinpath("possible_answer").joinpath(name)
        answers = {r["id"]: r.get("ground_truth") for r in _read_lines(anode, str(anode))}
        for row in _read_lines(qnode, str(qnode)):
            tools: list[JsonObject] = []
            excluded = set(row.get("excluded_function") or ())
            for cls in row.get("involved_classes") or ():
                if cls not in docs:
                    doc = data.joinpath("multi_turn_func_doc").joinpath(_CLASS_DOCS[cls])
                    docs[cls] = _read_lines(doc, str(doc))
                tools += [_tool(fn) for fn in docs[cls] if fn["name"] not in excluded]
            truth = answers.get(row["id"]) or []
            turns = tuple(tuple(t) for t in row["question"])
            names = tuple(tuple(call_name(c) for c in turn) for turn in truth)
            # A turn without ground truth: names cannot be matched.
            expected = names if len(names) == len(turns) else None
            tasks.append(
                Task(
                    id=row["id"],
                    source=f"bfcl:{subset}",
                    category=category,
                    system=(),
                    turns=turns,
                    tools=tuple(tools),
                    expected=expected,
                )
            )
            if limit is not None and len(tasks) >= limit:
                return tasks
    return tasks


def load_agent_jsonl(path: Path, category: str, limit: int | None) -> list[Task]:
    """Recorded sessions: one JSON object per line with ``messages`` and ``tools``.

    ``messages`` is an OpenAI conversation: system messages, then user turns, each
    followed by the assistant's tool calls, their ``tool`` results, and its answer.
    Each user message that follows a non-user message starts a turn; the recorded
    assistant calls become the turn's expected calls, the recorded tool results the
    answers loadtest gives (in order).
    """
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read it ({exc.strerror})") from exc
    tasks = []
    for lineno, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not valid JSON ({exc})") from exc
        tasks.append(_recorded(obj, where, category, str(path)))
        if limit is not None and len(tasks) >= limit:
            break
    if not tasks:
        raise DatasetError(f"{path}: holds no sessions")
    return tasks


def _recorded(obj: object, where: str, category: str, source: str) -> Task:
    if not isinstance(obj, dict) or not isinstance(obj.get("messages"), list):
        raise DatasetError(f"{where}: expected an object with a 'messages' list")
    tools = obj.get("tools")
    if not isinstance(tools, list) or not tools:
        raise DatasetError(f"{where}: 'tools' must be a non-empty list of OpenAI tools")
    system: list[JsonObject] = []
    turns: list[list[JsonObject]] = []
    expected: list[list[str]] = []
    results: list[list[str]] = []
    for i, m in enumerate(obj["messages"]):
        if not isinstance(m, dict) or m.get("role") not in ("system", "user", "assistant", "tool"):
            raise DatasetError(f"{where}: messages[{i}] has no known role")
        role = m["role"]
        if role == "system" and not turns:
            system.append(m)
        elif role == "user":
            prev = obj["messages"][i - 1] if i else {}
            if not turns or not isinstance(prev, dict) or prev.get("role") != "user":
                turns.append([])
                expected.append([])
                results.append([])
            turns[-1].append(m)
        elif not turns:
            raise DatasetError(f"{where}: messages[{i}] ({role}) comes before any user message")
        elif role == "assistant":
            for call in m.get("tool_calls") or ():
                fn = call.get("function") if isinstance(call, dict) else None
                if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
                    raise DatasetError(f"{where}: messages[{i}] has a tool call without a name")
                expected[-1].append(fn["name"])
        elif role == "tool":
            content = m.get("content")
            results[-1].append(
                content if isinstance(content, str) else orjson.dumps(content).decode()
            )
    if not turns:
        raise DatasetError(f"{where}: the session has no user message")
    return Task(
        id=str(obj.get("id", where)),
        source=f"agent-jsonl:{source}",
        category=str(obj.get("category", category)),
        system=tuple(system),
        turns=tuple(tuple(t) for t in turns),
        tools=tuple(tools),
        expected=tuple(tuple(e) for e in expected),
        results=tuple(tuple(r) for r in results),
    )
