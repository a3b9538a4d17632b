"""BFCL questions from the ``bfcl-eval`` package, turned into OpenAI tool requests.

BFCL writes its schemas in a Python flavour (``dict``, ``float``, ``tuple``, ``any``)
and uses dotted function names (``math.factorial``) that the OpenAI API rejects; we
convert both, as BFCL's own OpenAI handler does, and keep a map back to the original
names so the expected answers still apply.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import orjson

from loadtest.datasets.prompt import Prompt
from loadtest.errors import DatasetError, MissingPackageError

__all__ = ["DEFAULT_SUBSETS", "load_bfcl", "to_json_schema"]

DEFAULT_SUBSETS = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple")
_TYPE_MAP = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "list": "array",
    "int": "integer",
    "str": "string",
    "bool": "boolean",
}
_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


def to_json_schema(schema: Any) -> Any:
    """Rewrite BFCL's Python-flavoured types into JSON Schema, recursively."""
    if isinstance(schema, list):
        return [to_json_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key == "type" and isinstance(value, str):
            if value == "any":
                continue
            out[key] = _TYPE_MAP.get(value, value)
        elif key in ("properties",) and isinstance(value, dict):
            out[key] = {k: to_json_schema(v) for k, v in value.items()}
        elif key in ("items", "additionalProperties", "anyOf", "oneOf", "allOf"):
            out[key] = to_json_schema(value)
        else:
            out[key] = value
    return out


def _data_dir() -> Any:
    try:
        return resources.files("bfcl_eval").joinpath("data")
    except ModuleNotFoundError as exc:
        raise MissingPackageError(
            "bfcl",
            "bfcl-eval",
            "pip install --no-deps bfcl-eval (its own dependencies "
            "pull in torch; loadtest needs only its data files)",
        ) from exc


def _read_lines(node: Any, origin: str) -> list[dict[str, Any]]:
    rows = []
    for lineno, line in enumerate(node.read_bytes().splitlines(), 1):
        if not line.strip():
            continue
        try:
            rows.append(orjson.loads(line))
        except orjson.JSONDecodeError as exc:
            raise DatasetError(f"{origin}:{lineno}: not valid JSON ({exc})") from exc
    return rows


def load_bfcl(subsets: tuple[str, ...], category: str, limit: int | None) -> list[Prompt]:
    """Single-turn BFCL questions of the named subsets, with their expected calls."""
    data = _data_dir()
    prompts: list[Prompt] = []
    for subset in subsets or DEFAULT_SUBSETS:
        name = f"BFCL_v4_{subset}.json"
        qnode = data.joinpath(name)
        if not qnode.is_file():
            known = sorted(
                p.name[len("BFCL_v4_") : -len(".json")]
                for p in data.iterdir()
                if p.name.startswith("BFCL_v4_")
            )
            raise DatasetError(
                f"bfcl subset {subset!r} not found in bfcl-eval; known subsets: " + ", ".join(known)
            )
        answers: dict[str, Any] = {}
        anode = data.joinpath("possible_answer").joinpath(name)
        if anode.is_file():
            answers = {r["id"]: r.get("ground_truth") for r in _read_lines(anode, str(anode))}
        for row in _read_lines(qnode, str(qnode)):
            prompt = _to_prompt(row, subset, category, answers.get(row.get("id", "")))
            if prompt is not None:
                prompts.append(prompt)
            if limit is not None and len(prompts) >= limit:
                return prompts
    return prompts


def _to_prompt(row: dict[str, Any], subset: str, category: str, expected: Any) -> Prompt | None:
    question = row.get("question")
    functions = row.get("function")
    if not question or not functions or not isinstance(question[0], list):
        return None
    if len(question) != 1:
        return None  # multi-turn needs tool execution between turns
    tools = []
    name_map = []
    for fn in functions:
        original = fn.get("name", "")
        safe = _UNSAFE.sub("_", original)
        if safe != original:
            name_map.append((safe, original))
        tools.append(
            {
                "type": "function",
                "function": {
                    "name": safe,
                    "description": fn.get("description", ""),
                    "parameters": to_json_schema(fn.get("parameters", {"type": "object"})),
                },
            }
        )
    return Prompt(
        id=str(row.get("id", "")),
        source=f"bfcl:{subset}",
        category=category,
        messages=tuple(question[0]),
        tools=tuple(tools),
        expected_calls=tuple(expected) if isinstance(expected, list) else None,
        name_map=tuple(name_map),
    )
