"""Tool-call validity (JSON, offered function, schema) and BFCL answer matching."""

from __future__ import annotations

from loadtest.protocol.openai import ToolCall
from loadtest.protocol.validate import ToolValidator, matches_expected
from tests.conftest import WEATHER_TOOL

TOOLS = (WEATHER_TOOL,)


def call(args: str, name: str = "get_weather", index: int = 0, t: int = 10) -> ToolCall:
    return ToolCall(index=index, name=name, arguments=args, id=None, completed_ns=t)


def test_valid_call_reports_when_it_completed() -> None:
    v = ToolValidator().judge([call('{"city": "Oslo", "days": 2}', t=77)], TOOLS, None)
    assert v.valid and v.first_valid_ns == 77 and v.correct is None and v.problem is None


def test_broken_json_unknown_function_and_schema_violations_are_invalid() -> None:
    val = ToolValidator()
    cases = {
        '{"city": "Oslo", "da': "not JSON",
        '{"city": "Oslo"}': "'days' is a required property",
        '{"city": "Oslo", "days": 9}': "days: 9 is greater than the maximum of 7",
        "[1]": "not a JSON object",
    }
    for args, problem in cases.items():
        v = val.judge([call(args)], TOOLS, None)
        assert not v.valid
        assert v.problem is not None and problem in v.problem
    v = val.judge([call("{}", name="launch_rockets")], TOOLS, None)
    assert v.problem is not None and "not offered" in v.problem


def test_first_valid_call_is_the_earliest_valid_one() -> None:
    calls = [
        call('{"city": "A", "days": 1}', index=0, t=50),
        call('{"city": "B", "days": 1}', index=1, t=30),
    ]
    assert ToolValidator().judge(calls, TOOLS, None).first_valid_ns == 30


def test_expected_answers_bfcl_style() -> None:
    expected = [{"math.factorial": {"number": [5], "mode": ["", "exact"]}}]
    assert matches_expected([("math.factorial", {"number": 5})], expected)
    assert matches_expected([("math.factorial", {"number": 5.0, "mode": "Exact"})], expected)
    assert not matches_expected([("math.factorial", {"number": 6})], expected)
    assert not matches_expected([("math.factorial", {"number": 5, "extra": 1})], expected)
    assert not matches_expected([("math.gamma", {"number": 5})], expected)
    assert not matches_expected([], expected)


def test_parallel_calls_match_in_any_order() -> None:
    expected = [{"f": {"x": [1]}}, {"f": {"x": [2]}}]
    assert matches_expected([("f", {"x": 2}), ("f", {"x": 1})], expected)
    assert not matches_expected([("f", {"x": 2}), ("f", {"x": 2})], expected)


def test_correctness_uses_the_original_names() -> None:
    tool = {
        "type": "function",
        "function": {
            "name": "math_factorial",
            "parameters": {"type": "object", "properties": {"number": {"type": "integer"}}},
        },
    }
    v = ToolValidator().judge(
        [call('{"number": 5}', name="math_factorial")],
        (tool,),
        [{"math.factorial": {"number": [5]}}],
        (("math_factorial", "math.factorial"),),
    )
    assert v.valid and v.correct is True
