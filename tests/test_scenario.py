"""Scenario files: the shipped ones load, and every mistake names file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.config.feature_specs import AGENT, FAULTS, SIM, TARGET, TASKS
from loadtest.config.scenario import load_scenario, parse_scenario
from loadtest.errors import ScenarioError

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.toml")), ids=lambda p: p.name)
def test_shipped_scenarios_are_valid(path: Path) -> None:
    sc = load_scenario(path)
    # Prompts, or for an agent scenario tasks (and then no prompts).
    assert bool(sc.sources) != bool(AGENT.get(sc) is not None and TASKS.of(sc))
    assert sc.name == path.stem


def test_the_five_required_scenarios_ship() -> None:
    names = {p.stem for p in SCENARIOS.glob("*.toml")}
    assert {"tool-calls", "reasoning", "code", "multilingual", "mixed"} <= names
    assert {"draft-failure", "cancellations", "cold-start"} <= names


def test_the_default_scenario_shows_a_fault() -> None:
    sc = load_scenario(SCENARIOS / "mixed.toml")
    assert SIM.of(sc).speculative
    assert FAULTS.of(sc).events


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.toml"
    p.write_text(text)
    return p


BASE = '[[sources]]\nkind = "inline"\nprompts = ["hi"]\n'


def test_unknown_key_names_file_key_and_the_known_ones(tmp_path: Path) -> None:
    p = write(tmp_path, BASE + "[load]\nconcurency = 4\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario(p)
    msg = str(info.value)
    assert str(p) in msg and "load.concurency" in msg and "concurrency" in msg


def test_wrong_type_says_what_was_expected(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"max_tokens: expected an integer >= 1, got 0"):
        load_scenario(write(tmp_path, "max_tokens = 0\n" + BASE))
    with pytest.raises(ScenarioError, match=r"load.rate: expected a number > 0"):
        load_scenario(write(tmp_path, BASE + '[load]\nmode = "poisson"\nrate = -1\n'))
    with pytest.raises(ScenarioError, match=r"stream: expected true or false"):
        load_scenario(write(tmp_path, 'stream = "yes"\n' + BASE))
    with pytest.raises(ScenarioError, match=r"load.concurrency: expected an integer"):
        load_scenario(write(tmp_path, BASE + "[load]\nconcurrency = true\n"))


def test_an_arrival_process_takes_its_own_keys_and_checks_them(tmp_path: Path) -> None:
    gamma = load_scenario(write(tmp_path, BASE + '[load]\nmode = "gamma"\nburstiness = 3\n'))
    assert gamma.load.arrival == (("burstiness", 3.0),)
    assert load_scenario(write(tmp_path, BASE + '[load]\nmode = "gamma"\n')).load.arrival == (
        ("burstiness", 1.0),
    )
    # A key of another process is an error, not silently ignored.
    with pytest.raises(ScenarioError, match=r"load.burstiness: unknown key"):
        load_scenario(write(tmp_path, BASE + '[load]\nmode = "poisson"\nburstiness = 2\n'))
    with pytest.raises(ScenarioError, match=r"load.burstiness: expected a positive number"):
        load_scenario(write(tmp_path, BASE + '[load]\nmode = "gamma"\nburstiness = 0\n'))
    with pytest.raises(ScenarioError, match=r"load.burstiness: expected a number"):
        load_scenario(write(tmp_path, BASE + '[load]\nmode = "gamma"\nburstiness = "x"\n'))
    with pytest.raises(ScenarioError, match=r"load.mode: expected one of closed, constant"):
        load_scenario(write(tmp_path, BASE + '[load]\nmode = "bursty"\n'))


def test_bad_choices_and_sources(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"api: expected one of chat, completions, responses"):
        load_scenario(write(tmp_path, 'api = "embeddings"\n' + BASE))
    with pytest.raises(ScenarioError, match=r"sources\[0\].kind: expected one of"):
        load_scenario(write(tmp_path, '[[sources]]\nkind = "csv"\n'))
    with pytest.raises(ScenarioError, match=r"sources\[0\].path: a jsonl source needs a path"):
        load_scenario(write(tmp_path, '[[sources]]\nkind = "jsonl"\n'))
    with pytest.raises(ScenarioError, match=r"sources\[0\].subsets: unknown key"):
        load_scenario(write(tmp_path, BASE + 'subsets = ["a"]\n'))
    with pytest.raises(ScenarioError, match=r"sources: at least one"):
        load_scenario(write(tmp_path, 'name = "x"\n'))


def test_not_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="not valid TOML"):
        load_scenario(write(tmp_path, "name = \n"))
    with pytest.raises(ScenarioError, match="cannot read the file"):
        load_scenario(tmp_path / "absent.toml")


def test_sampling_cannot_override_what_loadtest_sets() -> None:
    with pytest.raises(ScenarioError, match=r"sampling\.stream"):
        parse_scenario(
            {"sources": [{"kind": "inline", "prompts": ["x"]}], "sampling": {"stream": False}},
            "t.toml",
        )


def test_relative_paths_resolve_beside_the_scenario(tmp_path: Path) -> None:
    sc = parse_scenario(
        {"sources": [{"kind": "jsonl", "path": "p.jsonl"}]}, "t.toml", base_dir=tmp_path
    )
    assert sc.sources[0].path == tmp_path / "p.jsonl"


def test_defaults() -> None:
    sc = parse_scenario({"sources": [{"kind": "inline", "prompts": ["x"]}]}, "t.toml")
    assert sc.api == "chat" and sc.stream and sc.load.mode == "closed"
    assert sc.load.duration_s == 30.0 and sc.load.requests is None


@pytest.mark.parametrize(
    ("text", "key", "problem"),
    [
        ('[[faults.events]]\nkind = "flood"\n', "faults.events[0].kind", "expected one of"),
        (
            '[[faults.events]]\nkind = "cancel"\nfraction = 0.5\nduration_s = 1\n',
            "faults.events[0].after_tokens",
            "after_tokens or after_ms",
        ),
        (
            '[[faults.events]]\nkind = "draft_down"\nat_s = 3\nlatency_ms = 5\n',
            "faults.events[0].latency_ms",
            "unknown key",
        ),
        (
            '[[faults.events]]\nkind = "draft_down"\nat_s = 3\n',
            "faults.events[0].duration_s",
            "> 0",
        ),
        ('[faults]\nproxy_upstream = "nohost"\n', "faults.proxy_upstream", "host:port"),
        ('[sim]\nitl_ms = "fast"\n', "sim.itl_ms", "expected a float"),
        ("[sim]\nwarp = 9\n", "sim.warp", "unknown simulator setting"),
        ("[sim]\naccept_code = 1.5\n", "sim", "between 0 and 1"),
        ('[target]\nready_url = "http://x:1/health"\n', "target.command", "command"),
        ('[target]\ncommand = "srv"\nready_url = "x"\n', "target.ready_url", "http(s) URL"),
    ],
)
def test_fault_target_and_sim_errors_name_the_key(
    tmp_path: Path, text: str, key: str, problem: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, BASE + text))
    assert info.value.key == key
    assert problem in str(info.value)


def test_a_managed_target_and_sim_settings(tmp_path: Path) -> None:
    sc = load_scenario(
        write(
            tmp_path,
            BASE
            + '[target]\ncommand = "server --port 9000"\nready_url = "http://127.0.0.1:9000/health"\n'
            + "[sim]\nspeculative = true\nitl_ms = 4\n",
        )
    )
    target = TARGET.get(sc)
    assert target is not None
    assert target.command == ("server", "--port", "9000")
    assert target.endpoint == "http://127.0.0.1:9000"
    assert SIM.of(sc).speculative and SIM.of(sc).settings == {"itl_ms": 4.0}


def test_feature_tables_come_from_their_registered_parsers(tmp_path: Path) -> None:
    """config finds a feature's table parser by the table's name; a table with no parser,
    or one that gives the wrong type, is an error naming the file and the table."""
    from loadtest.config.feature_specs import FaultPlan, SimSpec
    from loadtest.config.tables import TableSlot
    from loadtest.config.toml_tables import Table

    top = Table({"faults": {}, "nosuch": {}}, "s.toml", "")
    assert TableSlot("faults", FaultPlan).parse(top, tmp_path) == FaultPlan()
    with pytest.raises(ScenarioError) as info:
        TableSlot("nosuch", FaultPlan).parse(top, tmp_path)
    assert (info.value.path, info.value.key) == ("s.toml", "nosuch")
    assert "no parser for the [nosuch] table" in str(info.value)
    with pytest.raises(ScenarioError, match="gave a FaultPlan, not a SimSpec"):
        TableSlot("faults", SimSpec).parse(top, tmp_path)


def test_every_unknown_key_of_a_file_is_named_at_once_with_the_closest_known_one(
    tmp_path: Path,
) -> None:
    text = 'nmae = "x"\n' + BASE + "[load]\nconcurency = 4\nduraton_s = 3\n[timeouts]\nzzz = 1\n"
    with pytest.raises(ScenarioError) as caught:
        load_scenario(write(tmp_path, text))
    message = str(caught.value)
    assert "load.concurency: unknown key (did you mean 'concurrency'?)" in message
    assert "load.duraton_s (did you mean 'duration_s'?)" in message
    assert "timeouts.zzz (expected one of:" in message  # nothing close: the whole list
    assert "nmae (did you mean 'name'?)" in message
    assert "3 more unknown" in message


def test_unknown_keys_come_before_the_error_they_likely_caused(tmp_path: Path) -> None:
    # [load] is read (and its keys checked) before [sim]: the typo is named first.
    text = BASE + "[load]\nconcurency = 4\n[sim]\nspec_k = -1\n"
    with pytest.raises(ScenarioError, match=r"load.concurency: unknown key .*; and .*sim.spec_k"):
        load_scenario(write(tmp_path, text))


def test_a_sampling_key_near_a_request_field_is_named_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `temprature = 0.0` passed --check as valid and went to the server as written.
    from loadtest.cli.main import main

    path = tmp_path / "t.toml"
    path.write_text(
        'name = "t"\n[[sources]]\nkind = "inline"\nprompts = ["a"]\n[load]\nrequests = 3\n'
        "[sampling]\ntemprature = 0.0\ntop_p = 0.9\nmy_own_field = 1\n"
    )
    assert main(["run", str(path), "--check"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "valid, 1 warning below" in said
    assert "[sampling] temprature: not a request field servers know; did you mean" in said
    assert "'temperature'? (sent as written)" in said
    # A field that is near no known one is a server's own: sent, and not questioned.
    assert "top_p:" not in said and "my_own_field" not in said


def test_a_table_absent_from_two_scenarios_gives_each_a_default_of_its_own() -> None:
    # The simulator's settings are a dict: a default shared between scenarios would let
    # one run's --server-sweep setting leak into the next.
    one, two = (
        parse_scenario({"sources": [{"kind": "inline", "prompts": ["x"]}]}, "t.toml")
        for _ in range(2)
    )
    assert SIM.of(one) == SIM.of(two) and SIM.of(one).settings is not SIM.of(two).settings
    assert TARGET.get(one) is None and FAULTS.of(one).events == ()
