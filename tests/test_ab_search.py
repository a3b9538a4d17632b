"""``loadtest ab --search`` against real simulators: the crossover searched, its file."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from jsonschema import Draft202012Validator

from loadtest.cli.main import main
from loadtest.model.io import decision_schema_bytes, load_decision
from tests.test_ab_sweep import designed_crossover, scenario


def test_the_search_brackets_where_speculation_stops_paying(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The simulator's designed crossover (test_ab_sweep.py): the speculative side is
    # ~28% faster at concurrency 1 and ~35% slower at 8; its draft round trip moves the
    # measured crossing to ~2 (model: 4.6).
    out = tmp_path / "out"
    with designed_crossover() as (baseline, candidate):
        argv = ["ab", str(scenario(tmp_path, "duration_s = 2.5", 32)), "--out", str(out)]
        argv += ["--baseline", baseline, "--candidate", candidate, "--repeat", "2"]
        code = main([*argv, "--search", "concurrency=1..8", "--max-steps", "4"])
    printed = capsys.readouterr().out
    print(printed[printed.index("decision:") :])  # for -s
    assert code == 0, printed
    (folder,) = out.iterdir()
    assert folder.name.endswith("-ab-search-sweep")
    d = load_decision(folder)
    Draft202012Validator(orjson.loads(decision_schema_bytes())).validate(
        orjson.loads((folder / "decision.json").read_bytes())
    )
    search = d.get("search")
    assert search is not None
    (chat,) = [c for c in search["crossovers"] if c["category"] == "chat"]
    pays, stops = chat["pays_to"], chat["stops_from"]
    # Faster at 1, and stops paying at a load the plan found, inside the range, one
    # concurrency step above the last load that paid (or the steps ran out first).
    assert pays is not None and stops is not None, chat
    assert 1 <= pays < stops <= 8, chat
    assert chat["closed"] == (stops - pays == 1), chat
    loads = [p["load"] for p in search["probes"]]
    assert loads[0] == 1 and len(loads) <= 4 and len(set(loads)) == len(loads)
    assert search["alpha_per_step"] == pytest.approx(0.05 / 4)
    # Every step is an ab of its own, in the folder named by its order and load.
    for i, load in enumerate(loads):
        step = folder / f"step-{i:02d}-{load:g}"
        assert (step / "comparison.json").exists()
        assert len(list((step / "baseline").iterdir())) == 2
    assert "search, concurrency 1..8, steps in the order run:" in printed
    assert f"  chat: {chat['text']}" in printed
    # The folder's report shows the search as the terminal does.
    assert main(["report", str(folder)]) == 0
    page = (folder / "report.html").read_text()
    assert "<h2>The search</h2>" in page and "error control: alpha 0.05 spent" in page


def test_search_flags_are_checked_and_check_prints_the_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(scenario(tmp_path))
    argv = ["ab", path, "--search", "concurrency=1..64"]
    assert main([*argv, "--sweep", "concurrency=1,2", "--check"]) == 2
    assert "--search chooses its own loads: it does not go with --sweep" in capsys.readouterr().err
    assert main([*argv, "--max-steps", "1", "--check"]) == 2
    assert "--max-steps 1: a search needs at least 2 steps" in capsys.readouterr().err
    assert main(["ab", path, "--search", "concurrency=8..2", "--check"]) == 2
    assert "need 0 < LO < HI" in capsys.readouterr().err
    out = tmp_path / "out"
    assert main([*argv, "--repeat", "3", "--check", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "ab search: concurrency 1..64, at most 6 steps x 2 sides x 3 repeats = 36 runs" in text
    assert "each step judged at alpha 0.008333 (5% spent evenly over 6 steps)" in text
    assert not out.exists()
