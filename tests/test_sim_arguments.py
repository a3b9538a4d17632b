"""The simulator's tool-call arguments satisfy every BFCL schema shipped (#17).

``sim --invalid-tool-rate 0`` once produced ``number_of_adults: '3' is not of type
'integer'``: BFCL's schemas carry enums that contradict their type. Generator and
validator now read those schemas one way (``loadtest.protocol.schema``).
"""

from __future__ import annotations

import random
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from loadtest.datasets.bfcl import load_bfcl
from loadtest.errors import DatasetError
from loadtest.protocol.openai import ToolCall
from loadtest.protocol.schema import fitting_enum, repaired
from loadtest.protocol.validate import ToolValidator
from loadtest.sim import SimConfig
from loadtest.sim.model import fake_arguments, plan_response
from tests.bfcl_data import bfcl_or_skip

BFCL_DATA = bfcl_or_skip()


def _subsets() -> list[str]:
    data = BFCL_DATA
    return sorted(
        p.name[len("BFCL_v4_") : -len(".json")]
        for p in data.iterdir()
        if p.name.startswith("BFCL_v4_")
    )


def _schemas() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for subset in _subsets():
        try:
            prompts = load_bfcl((subset,), "tool_calls", None)
        except DatasetError:
            continue  # a file that is not JSON lines (format_sensitivity)
        for p in prompts:
            for tool in p.tools or ():
                fn = tool["function"]
                out.append((f"{subset}:{fn['name']}", fn.get("parameters") or {}))
    return out


def _problems(schema: dict[str, Any]) -> list[str] | None:
    """What is wrong with the arguments made for ``schema`` (None: not JSON Schema)."""
    try:
        validator = Draft202012Validator(repaired(schema))
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return None  # Java/JavaScript subsets name types JSON Schema lacks ('String')
    bad = []
    for seed in range(3):
        args = fake_arguments(schema, random.Random(seed))
        err = next(iter(validator.iter_errors(args)), None)
        if err is not None:
            bad.append(err.message[:120])
    return bad


def test_every_bfcl_schema_gets_valid_arguments() -> None:
    schemas = _schemas()
    assert len(schemas) > 3000
    # 8,726 schemas, 3,158 of them different (as written: the arguments are drawn in the
    # order of the keys, so the same keys in another order are another case): the same
    # schema gets the same arguments (seeded) and the same verdict, so each is judged
    # once. check_schema against the metaschema is most of the cost.
    verdicts: dict[bytes, list[str] | None] = {}
    checked = 0
    bad: list[str] = []
    for where, schema in schemas:
        key = orjson.dumps(schema)
        if key not in verdicts:
            verdicts[key] = _problems(schema)
        problems = verdicts[key]
        if problems is None:
            continue
        bad += [f"{where}: {p}" for p in problems]
        checked += 1
    assert checked > 3000
    assert not bad, bad[:10]


def test_the_reported_schema_gets_an_integer() -> None:
    schema = {
        "type": "object",
        "properties": {
            "number_of_adults": {"type": "integer", "enum": ["1", "2", "3", "dontcare"]},
            "metrics": {"type": "array", "items": {"type": "string"}, "enum": ["a", "b"]},
        },
        "required": ["number_of_adults", "metrics", "undescribed"],
    }
    for seed in range(20):
        args = fake_arguments(schema, random.Random(seed))
        assert isinstance(args["number_of_adults"], int)
        assert set(args["metrics"]) <= {"a", "b"}
        assert "undescribed" in args
        call = ToolCall(
            index=0, name="f", arguments=str(args).replace("'", '"'), id=None, completed_ns=1
        )
        tools = ({"type": "function", "function": {"name": "f", "parameters": schema}},)
        verdict = ToolValidator().judge([call], tools, None)
        assert verdict.valid, verdict.problem


def test_fitting_enum_keeps_values_of_the_type() -> None:
    assert fitting_enum({"type": "integer", "enum": ["1", 2]}) == [2]
    assert fitting_enum({"type": "integer", "enum": ["1"]}) is None
    assert fitting_enum({"enum": ["x"]}) == ["x"]
    assert fitting_enum({"type": "boolean", "enum": [1, True]}) == [True]


def test_a_tool_calls_id_follows_from_the_request_not_its_arrival() -> None:
    # Agent sessions send the id back in their history: an id from the arrival order
    # made every later request body (and so every draw for it) depend on interleaving.
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    request = {"messages": [{"role": "user", "content": "call f"}], "tools": [tool]}
    body = orjson.dumps(request)
    cfg = SimConfig()
    first = plan_response(cfg, body, request)
    assert first.tool_name == "f" and len(first.call_key) == 16
    assert plan_response(cfg, body, request).call_key == first.call_key
    other = {**request, "messages": [{"role": "user", "content": "call f again"}]}
    assert plan_response(cfg, orjson.dumps(other), other).call_key != first.call_key
    plain = {"messages": [{"role": "user", "content": "hi"}]}
    assert plan_response(cfg, orjson.dumps(plain), plain).call_key == ""
