"""The shipped scenarios: found by name from any folder, listed, copied with their data."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from loadtest.config.scenario import load_scenario
from loadtest.config.shipped import (
    copy_shipped,
    find_shipped,
    resolve_scenario_path,
    shipped_dir,
    shipped_scenarios,
)
from loadtest.errors import ScenarioError, UsageError

ROOT = Path(__file__).resolve().parent.parent


def test_every_shipped_file_is_package_data() -> None:
    # A file under loadtest/scenarios that the globs miss would be absent from the wheel.
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["loadtest"]
    package = ROOT / "loadtest"
    files = [p for p in (package / "scenarios").rglob("*") if p.is_file()]
    assert files
    for f in files:
        rel = f.relative_to(package)
        assert any(rel.match(g) for g in globs), f"{rel} is not in package-data {globs}"


def test_every_shipped_scenario_is_listed_with_a_description() -> None:
    listed = shipped_scenarios()
    assert {s.name for s in listed} == {p.stem for p in shipped_dir().glob("*.toml")}
    assert all(s.description and "\n" not in s.description for s in listed)
    assert {"mixed", "tool-calls", "trace"} <= {s.name for s in listed}


def test_names_resolve_from_any_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_scenario_path(None) == shipped_dir() / "mixed.toml"
    assert resolve_scenario_path("tool-calls") == shipped_dir() / "tool-calls.toml"
    assert resolve_scenario_path("code.toml") == shipped_dir() / "code.toml"
    # The docs' paths, typed where there is no scenarios/ folder.
    assert resolve_scenario_path("scenarios/trace.toml") == shipped_dir() / "trace.toml"
    assert load_scenario(resolve_scenario_path("trace")).sources[0].path is not None


def test_a_local_file_or_folder_wins_over_a_shipped_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "code.toml").write_text('name = "mine"\n')
    assert resolve_scenario_path("code") == Path("scenarios/code.toml")
    (tmp_path / "tool-calls").write_text('name = "x"\n')
    assert resolve_scenario_path("tool-calls") == Path("tool-calls")


def test_an_unknown_name_lists_the_shipped_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ScenarioError, match=r"nope: no such scenario.*tool-calls"):
        resolve_scenario_path("nope")
    # A path of the user's is left to the reader, which names the file.
    assert resolve_scenario_path("elsewhere/nope.toml") == Path("elsewhere/nope.toml")
    assert find_shipped("../mixed") is None


def test_init_copies_the_scenario_and_the_files_it_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    written = copy_shipped("trace", None)
    assert written == [Path("trace.toml"), Path("data/trace-small.jsonl")]
    copy = load_scenario(tmp_path / "trace.toml")
    assert copy.sources[0].path == tmp_path / "data" / "trace-small.jsonl"
    assert copy.sources[0].path.read_bytes() == (shipped_dir() / written[1]).read_bytes()
    with pytest.raises(UsageError, match="already exists"):
        copy_shipped("trace", None)
    (tmp_path / "mine").mkdir()
    assert copy_shipped("code", tmp_path / "mine") == [tmp_path / "mine" / "code.toml"]
    assert copy_shipped("trace", None, force=True)[0] == Path("trace.toml")
    with pytest.raises(UsageError, match="not a shipped scenario"):
        copy_shipped("nope", None)
