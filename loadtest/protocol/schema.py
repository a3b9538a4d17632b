"""How loadtest reads a tool's JSON Schema where its ``enum`` contradicts its ``type``.

BFCL ships schemas such as ``{"type": "integer", "enum": ["1", "2", "dontcare"]}`` or
``{"type": "array", "enum": ["trust", "buzz"]}``: taken literally, no value satisfies
them, so every call, from any model, would be judged invalid. Both the validator and
the simulator's argument generator read such a schema the same way: the ``type`` is what
the API promises, and an ``enum`` none of whose values has that type is a hint, dropped
(for an array it describes the items, so it moves there). One rule in one place keeps the
simulator's "valid" and the validator's "valid" the same thing.
"""

from __future__ import annotations

from typing import Any

from loadtest.model.json import JsonObject

__all__ = ["fitting_enum", "repaired"]

_CHECKS: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "object": dict,
    "array": list,
}


def _has_type(value: Any, kind: Any) -> bool:
    kinds = kind if isinstance(kind, list) else [kind]
    for k in kinds:
        if k == "null" and value is None:
            return True
        want = _CHECKS.get(k) if isinstance(k, str) else None
        if want is None:
            continue
        if isinstance(value, bool) and k != "boolean":
            continue  # JSON Schema: true is not an integer
        if isinstance(value, want):
            return True
    return False


def fitting_enum(schema: JsonObject) -> list[Any] | None:
    """The ``enum`` values a value may take: those of the declared type (all, untyped).

    None where there is no ``enum`` or none of its values has the type (then ``type``
    alone applies).
    """
    values = schema.get("enum")
    if not isinstance(values, list) or not values:
        return None
    kind = schema.get("type")
    if kind is None:
        return values
    fit = [v for v in values if _has_type(v, kind)]
    return fit or None


def repaired(schema: Any) -> Any:
    """``schema`` with every contradicting ``enum`` read as ``fitting_enum`` reads it."""
    if isinstance(schema, list):
        return [repaired(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        k: repaired(v) if isinstance(v, dict | list) and k != "enum" else v
        for k, v in schema.items()
    }
    if "properties" in schema and isinstance(schema["properties"], dict):
        out["properties"] = {k: repaired(v) for k, v in schema["properties"].items()}
    values = schema.get("enum")
    if isinstance(values, list) and values and "type" in schema:
        fit = fitting_enum(schema)
        if fit is None:
            del out["enum"]
            items = out.get("items")
            if schema.get("type") == "array" and isinstance(items, dict) and "enum" not in items:
                out["items"] = repaired(items | {"enum": values})
        elif len(fit) < len(values):
            out["enum"] = fit
    return out
