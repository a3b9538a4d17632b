"""Hypothesis fuzzing: parsers never crash; bad scenarios and flags get a clear error.

``benchmarks/fuzz_parsers.py`` runs the parser targets for much longer (with atheris when
installed); here they run for a bounded number of examples on every CI run.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.fuzz_parsers import fuzz_json_chunk, fuzz_stream
from loadtest.cli.main import main
from loadtest.config.scenario import load_scenario, parse_scenario
from loadtest.errors import DatasetError, ScenarioError

FUZZ = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_SSE_PIECES = st.sampled_from(
    [
        b"data: ",
        b"data:",
        b"event: error\n",
        b": ping\n",
        b"id: 7\n",
        b"retry: 100\n",
        b"\n",
        b"\r\n",
        b"\r",
        b"[DONE]",
        b'{"choices":[{"delta":{"content":"x"}}]}',
        b'{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}',
        b'{"choices":[],"usage":{"completion_tokens":3}}',
        b'{"error":{"message":"no"}}',
        b"{",
        b"\xff\xfe",
    ]
)

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "choices",
                    "delta",
                    "content",
                    "tool_calls",
                    "function",
                    "name",
                    "arguments",
                    "index",
                    "usage",
                    "completion_tokens",
                    "finish_reason",
                    "timings",
                    "error",
                    "id",
                    "message",
                    "text",
                    "reasoning_content",
                ]
            )
            | st.text(max_size=4),
            inner,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@FUZZ
@given(st.binary(max_size=2048))
def test_stream_parser_survives_any_bytes(data: bytes) -> None:
    fuzz_stream(data)


@FUZZ
@given(st.lists(_SSE_PIECES, max_size=40).map(b"".join), st.binary(max_size=16))
def test_stream_parser_survives_near_valid_streams(stream: bytes, cuts: bytes) -> None:
    fuzz_stream(bytes([len(cuts)]) + cuts + stream)


@FUZZ
@given(_JSON)
def test_chunk_reader_survives_any_json(value: Any) -> None:
    # The stdlib encoder: it writes integers past 64 bits, which orjson cannot.
    for wrapped in (value, {"choices": [value]}, {"choices": [{"delta": value}]}):
        fuzz_json_chunk(json.dumps(wrapped).encode())


# -- scenarios ---------------------------------------------------------------------------

_VALUES = st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats() | st.text(max_size=6)
_KEYS = st.sampled_from(
    [
        "name",
        "max_tokens",
        "api",
        "stream",
        "seed",
        "sampling",
        "model",
        "load",
        "timeouts",
        "slo",
        "faults",
        "target",
        "sim",
        "auth",
        "sources",
        "api_key",
        "unknown",
    ]
)
_LOAD_KEYS = st.sampled_from(
    [
        "mode",
        "concurrency",
        "rate",
        "duration_s",
        "requests",
        "warmup_s",
        "burstiness",
        "think_time_ms",
        "ramp_up_s",
        "grace_s",
        "keepalive",
        "rate_ceiling",
        "typo",
    ]
)
_SOURCE = st.fixed_dictionaries(
    {"kind": st.sampled_from(["inline", "jsonl", "sharegpt", "nope", 3])},
    optional={
        "prompts": st.lists(st.text(max_size=5), max_size=3) | _VALUES,
        "category": _VALUES,
        "weight": _VALUES,
        "path": _VALUES,
        "limit": _VALUES,
    },
)


@st.composite
def _scenarios(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = {"sources": draw(st.lists(_SOURCE, min_size=0, max_size=2))}
    for key in draw(st.lists(_KEYS, max_size=5)):
        data[key] = draw(_VALUES | st.dictionaries(_LOAD_KEYS, _VALUES, max_size=4))
    data["load"] = draw(st.dictionaries(_LOAD_KEYS, _VALUES, max_size=5))
    return data


@FUZZ
@given(_scenarios())
def test_bad_scenarios_get_a_scenario_error_naming_the_file(data: dict[str, Any]) -> None:
    try:
        parse_scenario(data, "fuzzed.toml")
    except ScenarioError as exc:
        text = str(exc)
        assert text.startswith("fuzzed.toml"), text
        assert "\n" not in text.strip() or len(text.splitlines()) < 6
    except DatasetError:  # a source file named by the fuzzer does not exist: a clear error
        pass


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_file_bytes_get_a_scenario_error(tmp_path_factory: Any, raw: bytes) -> None:
    path = Path(tmp_path_factory.mktemp("fz")) / "bad.toml"
    path.write_bytes(raw)
    try:
        tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        with pytest.raises(ScenarioError, match=r"bad\.toml"):
            load_scenario(path)


# -- flags -------------------------------------------------------------------------------

_FLAG = st.sampled_from(
    [
        "--concurrency",
        "--rate",
        "--duration",
        "--requests",
        "--max-tokens",
        "--warmup",
        "--seed",
        "--model",
        "--endpoint",
        "--api-key-env",
        "--ca-bundle",
        "--api-key",
        "--loop",
        "--bogus",
    ]
)
_FLAG_VALUE = st.sampled_from(["0", "-1", "1", "2.5", "nan", "inf", "abc", "", "1e9", "8"])


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(st.tuples(_FLAG, _FLAG_VALUE), max_size=4))
def test_bad_flags_exit_2_with_one_paragraph_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[tuple[str, str]]
) -> None:
    # Inline prompts: --check loads a scenario's prompts as the run does, and the data
    # sets of the default scenario (~0.2 s a load) would be most of this test's time.
    scenario = tmp_path / "flags.toml"
    scenario.write_text('name = "flags"\n[[sources]]\nkind = "inline"\nprompts = ["a"]\n')
    argv = ["run", str(scenario), "--check", "--no-tui"]
    for flag, value in flags:
        argv += [flag, value]
    code = main(argv)
    err = capsys.readouterr().err
    assert code in (0, 2), (argv, err)
    assert "Traceback" not in err
    last = dict(flags)  # a repeated flag: the last one counts, as in argparse
    if any(_surely_bad(flag, value) for flag, value in last.items()):
        assert code == 2, (argv, err)
    if code == 2:
        assert err.startswith("loadtest: "), err
        assert len(err.strip().splitlines()) <= 3, err


_POSITIVE = {"--concurrency", "--rate", "--duration", "--requests", "--max-tokens"}
_NUMERIC = {*_POSITIVE, "--warmup", "--seed"}


def _surely_bad(flag: str, value: str) -> bool:
    if flag in ("--bogus", "--api-key"):
        return True
    if flag == "--endpoint":
        return True  # none of the fuzzed values is a URL
    if flag == "--loop":
        return value not in ("asyncio", "uvloop")
    if flag in _NUMERIC and value in ("nan", "inf", "abc", "", "-1"):
        return True
    if flag in _POSITIVE and value == "0":
        return True
    integer_flags = {"--concurrency", "--requests", "--max-tokens", "--seed"}
    return flag in integer_flags and value in ("2.5", "1e9")
