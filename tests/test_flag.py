"""Flags declared once, on the options' fields (loadtest/flag.py): the CLI's arguments,
the options read back from them, and the bounds a Python caller is held to as well."""

from __future__ import annotations

import argparse
import dataclasses
import math
from typing import Any

import pytest

from loadtest.app.engines.serve_options import LlamaOptions, VllmOptions
from loadtest.app.options import apply_overrides
from loadtest.app.run_options import RunOptions
from loadtest.cli.declared import add_declared, read_declared
from loadtest.cli.flags import add_load_flags, add_run_flags, run_options
from loadtest.cli.main import main
from loadtest.config.scenario import parse_scenario
from loadtest.errors import UsageError
from loadtest.flag import Flag, check_bounds, declared_flags, flag


def _run_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    add_run_flags(p)
    add_load_flags(p)
    return p


def test_every_flag_of_a_run_is_parsed_into_its_field() -> None:
    args = _run_parser().parse_args(
        [
            "tool-calls",
            "--rate",
            "2.5",
            "--requests",
            "40",
            "--no-tui",
            "--no-keepalive",
            "--loop",
            "uvloop",
            "--source-address",
            "127.0.0.2,127.0.0.3",
            "--source-address",
            "127.0.0.4",
            "--slo",
            "ttft_ms.p95=500",
            "--slo",
            "none",
            "--first-byte-timeout",
            "3",
            "--workers",
            "2",
        ]
    )
    o = run_options(args)
    assert (o.scenario, o.rate, o.requests, o.concurrency, o.duration) == (
        "tool-calls",
        2.5,
        40,
        None,
        None,
    )
    assert (o.tui, o.keepalive, o.uvloop, o.workers) == (False, False, True, 2)
    assert o.source_addresses == ("127.0.0.2", "127.0.0.3", "127.0.0.4")
    assert o.slo == ("ttft_ms.p95=500", "none")
    assert o.first_byte_timeout == 3.0


def test_no_flag_given_is_the_options_defaults() -> None:
    # What argparse fills in for an absent flag is the field's own default.
    assert run_options(_run_parser().parse_args([])) == RunOptions()


def test_over_replaces_what_the_flags_said() -> None:
    o = run_options(_run_parser().parse_args(["--concurrency", "4"]), tui=False, label="A 1/2")
    assert (o.concurrency, o.tui, o.label) == (4, False, "A 1/2")


def test_every_declared_flag_of_a_run_is_on_the_commands_that_make_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for command, scopes in (
        ("run", ("runs", "load")),
        ("ab", ("runs", "load")),
        ("sweep", ("runs",)),
    ):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = capsys.readouterr().out
        for f, declared in declared_flags(RunOptions):
            if declared.scope in scopes:
                assert declared.flag_name(f.name) in text, (command, f.name)


def test_a_sweeps_steps_are_not_taken_for_a_runs_concurrency() -> None:
    # sweep --concurrency 1,2,4 is a list of steps, parsed into its own name.
    from loadtest.cli.main import _parser

    parser, _ = _parser()
    args = parser.parse_args(["sweep", "--concurrency", "1,2,4"])
    assert args.concurrency_steps == "1,2,4"
    assert run_options(args).concurrency is None


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"rate": 0.0}, "--rate must be positive, got 0"),
        ({"rate": math.nan}, "--rate must be a finite number, got nan"),
        ({"concurrency": 0}, "--concurrency must be at least 1, got 0"),
        ({"duration": -1.0}, "--duration must be positive, got -1"),
        ({"requests": 0}, "--requests must be at least 1, got 0"),
        ({"warmup": -0.5}, "--warmup must be 0 or more, got -0.5"),
        ({"seed": -1}, "--seed must be 0 or more, got -1"),
        ({"model": "  "}, "--model must not be empty"),
        ({"max_tokens": 0}, "--max-tokens must be at least 1, got 0"),
        ({"chunk_timeout": 0.0}, "--chunk-timeout must be positive, got 0"),
        ({"timeout": math.inf}, "--timeout must be a finite number, got inf"),
        ({"workers": 0}, "--workers must be at least 1, got 0"),
    ],
)
def test_a_python_caller_is_held_to_the_flags_bounds(given: dict[str, Any], said: str) -> None:
    sc = parse_scenario({"sources": [{"kind": "inline", "prompts": ["hi"]}]}, "t.toml")
    with pytest.raises(UsageError) as err:
        apply_overrides(sc, RunOptions(**given))
    assert str(err.value) == said


def test_values_inside_their_bounds_pass() -> None:
    check_bounds(RunOptions(rate=0.1, concurrency=1, warmup=0.0, seed=0, workers=1))
    LlamaOptions(draft_min=0, draft_p_min=1.0).check()
    VllmOptions(kv_cache_gb=0.5).check()


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (LlamaOptions(parallel=0), "--parallel must be at least 1, got 0"),
        (LlamaOptions(draft_p_min=1.5), "--draft-p-min must be between 0 and 1, got 1.5"),
        (LlamaOptions(draft_min=-1), "--draft-min must be 0 or more, got -1"),
        (VllmOptions(kv_cache_gb=0.0), "--kv-cache-gb must be positive, got 0"),
        (VllmOptions(max_num_seqs=0), "--max-num-seqs must be at least 1, got 0"),
    ],
)
def test_the_engines_options_are_held_to_their_flags_bounds(
    options: LlamaOptions | VllmOptions, said: str
) -> None:
    with pytest.raises(UsageError) as err:
        options.check()
    assert str(err.value) == said


def test_serve_llamas_flags_are_read_into_its_options() -> None:
    p = argparse.ArgumentParser()
    add_declared(p, LlamaOptions)
    args = p.parse_args(["--spec", "draft", "--draft-layers", "9", "--draft-p-min", "0.25"])
    assert read_declared(args, LlamaOptions) == LlamaOptions(
        spec="draft", draft_layers=9, draft_p_min=0.25
    )
    assert read_declared(p.parse_args([]), LlamaOptions) == LlamaOptions()


def test_a_flag_named_in_no_other_way_is_its_field_dashed() -> None:
    @dataclasses.dataclass(frozen=True)
    class Options:
        max_rounds: int = flag(3, kind=int, help="rounds")
        keep: bool = flag(True, negated=True, help="drop")

    names = [d.flag_name(f.name) for f, d in declared_flags(Options)]
    assert names == ["--max-rounds", "--no-keep"]
    assert Flag(help="x", name="--loop").flag_name("uvloop") == "--loop"


def test_a_whole_number_is_named_as_given_and_a_ceiling_alone_holds() -> None:
    with pytest.raises(UsageError, match=r"^--seed must be 0 or more, got -12345678$"):
        check_bounds(RunOptions(seed=-12345678))
    with pytest.raises(UsageError, match=r"^--p must be at most 1, got 5$"):
        Flag(help="x", maximum=1).check("p", 5.0)


def test_a_declaration_whose_absent_flag_disagrees_with_its_field_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Switched:
        on: bool = flag(True, switch=True, help="given alone, sets True")

    @dataclasses.dataclass(frozen=True)
    class Chosen:
        loop: bool = flag(False, choices=("a", "b"), shown_default="c", help="x")

    for options, said in ((Switched, "reads False when absent"), (Chosen, "not one of its")):
        with pytest.raises(TypeError, match=said):
            add_declared(argparse.ArgumentParser(), options, "runs")
