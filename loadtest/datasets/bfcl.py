"""BFCL questions from the ``bfcl-eval`` package, turned into OpenAI tool requests.

BFCL writes its schemas in a Python flavour (``dict``, ``float``, ``tuple``, ``any``)
and uses dotted function names (``math.factorial``) that the OpenAI API rejects; we
convert both, as BFCL's own OpenAI handler does, and keep a map back to the original
names so the expected answers still apply.
"""

from __future__ import annotations

import re
import zipfile
from importlib import resources
from pathlib import Path
from typing import Any

import orjson

from loadtest.datasets.cache import cache_dir
from loadtest.errors import DatasetError, MissingPackageError
from loadtest.model.prompt import Prompt

__all__ = [
    "BFCL_FETCH",
    "BFCL_PIN",
    "DEFAULT_SUBSETS",
    "bfcl_data_dir",
    "load_bfcl",
    "to_json_schema",
]

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


BFCL_PIN = "bfcl-eval==2026.3.23"
"""The release whose data files loadtest is tested with (the README's install line)."""
BFCL_FETCH = f"pip download -q --no-deps -d ~/.cache/loadtest '{BFCL_PIN}'"
"""Puts BFCL's wheel where loadtest reads its data, without installing the package: its
metadata pins numpy 1.x and pulls in torch, so an installed copy makes pip report
conflicts on every later install, though loadtest reads nothing but its data files."""


def _wheel_folders() -> list[Path]:
    home = Path.home() / ".cache" / "loadtest"
    return list(dict.fromkeys((cache_dir(), home)))


def bfcl_data_dir() -> Any:
    """BFCL's ``data`` folder: the installed package's, else inside a downloaded wheel."""
    try:
        return resources.files("bfcl_eval").joinpath("data")
    except ModuleNotFoundError:
        pass
    wheels = sorted(w for f in _wheel_folders() for w in f.glob("bfcl_eval-*.whl"))
    if wheels:
        # The newest release wins; a zip's members read as a folder of files.
        return zipfile.Path(wheels[-1], "bfcl_eval/data/")
    raise MissingPackageError(
        "bfcl",
        BFCL_PIN,
        f"{BFCL_FETCH} (or pip install --no-deps '{BFCL_PIN}'; loadtest needs only its data)",
    )


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
    data = bfcl_data_dir()
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
