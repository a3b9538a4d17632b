"""``sim:none|spec``: the built-in simulator as an ``ab`` side type like any other
(``app.ab.side_kinds.SIM``), whose server each run starts itself."""

from __future__ import annotations

from typing import cast

import pytest

from loadtest.app.ab.server_sweep import parse_server_sweep, with_setting
from loadtest.app.ab.side_types import Launch, SideTypeBase, in_run_of
from loadtest.app.ab.sides import draft_sides, parse_side
from loadtest.app.options import RunOptions, resolve_scenario
from loadtest.config.feature_specs import SIM
from loadtest.errors import UsageError
from loadtest.registry import DISABLE_ENV


def test_a_sim_side_is_a_registered_side_type_served_by_the_run() -> None:
    spec, none = parse_side("sim:spec", "--candidate"), parse_side("sim:none", "--baseline")
    assert (spec.kind, spec.managed, spec.url, spec.drafts) == ("sim", True, None, True)
    assert none.drafts is False
    base = RunOptions(scenario="tool-calls", endpoint="http://127.0.0.1:9")
    served = spec.served_in_run(base)
    # The run's own simulator, speculating: the endpoint given for the other side is not it.
    assert served is not None and served.endpoint is None and served.sim_speculative is True
    assert SIM.of(resolve_scenario(served)).speculative is True
    assert parse_side("llama:ngram", "--candidate").served_in_run(base) is None  # launched
    assert parse_side("http://127.0.0.1:9", "--baseline").served_in_run(base) is None
    with pytest.raises(UsageError, match=r"--candidate 'sim:x': a simulator side is sim:none"):
        parse_side("sim:x", "--candidate")


def test_a_draft_length_wins_over_a_swept_spec_k_in_the_runs_simulator() -> None:
    spec = parse_side("sim:spec", "--candidate")
    swept = with_setting(spec, parse_server_sweep("spec_k=8"), 8)
    share = with_setting(swept, parse_server_sweep("step_token_share=0.27"), 0.27)
    sides = draft_sides(share, (1, 3))
    assert list(sides) == ["candidate-k1", "candidate-k3"]
    for k, side in zip((1, 3), sides.values(), strict=True):
        assert side.given == f"sim:spec K={k}" and side.draft_max == k
        served = side.served_in_run(RunOptions(scenario="tool-calls"))
        assert served is not None
        settings = SIM.of(resolve_scenario(served)).settings
        assert settings["spec_k"] == k and settings["step_token_share"] == 0.27
    with pytest.raises(UsageError, match="not a speculative deployment"):
        draft_sides(parse_side("sim:none", "--candidate"), (1, 2))
    with pytest.raises(UsageError, match=r"spec_k=1\.5: a whole number"):
        with_setting(spec, parse_server_sweep("spec_k=1.5"), 1.5)


def test_the_sim_side_type_can_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DISABLE_ENV, "sides:sim")
    with pytest.raises(UsageError, match=r"'sim' is turned off"):
        parse_side("sim:spec", "--candidate")


def test_a_side_type_whose_in_run_gives_no_options_is_named() -> None:
    class Confused(SideTypeBase):
        start_cost = "nothing"

        def parse(self, mode: str, given: str) -> str:
            return mode

        def launch(self, settings: str, host: str, port: int) -> Launch:
            return Launch(("true",), "m")

        def in_run(self, settings: str, options: RunOptions) -> RunOptions | None:
            return cast(RunOptions, {"endpoint": None})  # a dict, not the options

    with pytest.raises(UsageError, match=r"side type Confused gave dict from in_run"):
        in_run_of(Confused(), "x", RunOptions())

    class Plain(Confused):
        in_run = SideTypeBase.in_run  # the default: launched

    assert in_run_of(Plain(), "x", RunOptions()) is None
