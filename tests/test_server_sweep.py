"""``ab --server-sweep``: a decision per server setting, each on freshly started sides.

Against the simulator's designed crossover (``tests/test_ab_sweep.py``): how much a
verify step's extra tokens cost (``step_token_share``) moves the load where speculation
stops paying: at 0.27 the model's crossover is 4.6 sequences (measured ~2), at 0.02 it
is 85, beyond the range. The flag's checks name the side and the setting.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from loadtest.app.ab.server_sweep import parse_server_sweep, with_setting
from loadtest.app.ab.sides import parse_side
from loadtest.cli.main import main
from loadtest.errors import UsageError
from loadtest.model.io import load_decision
from loadtest.model.server_sweep import ServerSweepResult
from tests.test_ab_sweep import ACCEPT, VERIFY, K

SIM = (
    "[sim]\nttft_ms = 5.0\nitl_ms = 8.0\nttft_sigma = 0.1\nitl_sigma = 0.1\n"
    f"min_output_fraction = 1.0\nstep_token_share = 0.27\naccept_chat = {ACCEPT}\n"
    f"spec_k = {K}\nverify_factor = {VERIFY}\ndraft_token_ms = 0.1\n"
)


def _scenario(tmp_path: Path) -> Path:
    prompts = ", ".join(f'"prompt {i}"' for i in range(12))
    path = tmp_path / "servers.toml"
    path.write_text(
        f'name = "servers"\nmax_tokens = 32\n'
        f'[[sources]]\nkind = "inline"\ncategory = "chat"\nprompts = [{prompts}]\n'
        "[load]\nconcurrency = 1\nduration_s = 2.0\nwarmup_s = 0\n" + SIM
    )
    return path


def test_each_setting_gets_its_own_search_and_the_crossover_moves_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["ab", str(_scenario(tmp_path)), "--baseline", "sim:none", "--candidate", "sim:spec"]
    argv += ["--search", "concurrency=1..8", "--max-steps", "3", "--repeat", "2"]
    code = main([*argv, "--server-sweep", "step_token_share=0.27,0.02", "--out", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    (folder,) = out.iterdir()
    result: ServerSweepResult = orjson.loads((folder / "server-sweep.json").read_bytes())
    assert result["setting"] == "step_token_share" and not result["interrupted"]
    costly, cheap = result["values"]
    assert (costly["value"], cheap["value"]) == (0.27, 0.02)
    stops = {}
    for setting in (costly, cheap):
        (search_folder,) = Path(setting["folder"]).iterdir()
        d = load_decision(search_folder)
        search = d.get("search")
        assert search is not None
        (chat,) = [c for c in search["crossovers"] if c["category"] == "chat"]
        assert chat["pays_to"] is not None, chat  # faster at 1 either way
        stops[setting["value"]] = chat["stops_from"]
        # Both sides ran their repeats at every step; a sim side has no measured start.
        assert [s["side"] for s in setting["sides"]] == ["sim:none", "sim:spec"]
        assert all(s["runs"] == 2 * len(search["probes"]) for s in setting["sides"])
        assert all(s["ready_s"] is None for s in setting["sides"])
    # Costly verify steps stop paying inside the range; cheap ones pay across the 3
    # steps the search may take (1, 2, 4), so it cannot yet say where they stop.
    assert stops[0.27] is not None and stops[0.27] <= 8
    assert stops[0.02] is None
    assert "server setting step_token_share: where the candidate stops paying" in printed
    assert "  step_token_share=0.02:" in printed


def test_the_setting_is_checked_against_every_side() -> None:
    sweep = parse_server_sweep("parallel=1,2")
    llama = with_setting(parse_side("llama:ngram", "--candidate"), sweep, 2)
    assert llama.llama is not None and llama.llama.parallel == 2
    vllm = with_setting(
        parse_side("vllm:none", "--baseline"), parse_server_sweep("max-num-seqs=4"), 4
    )
    assert vllm.vllm is not None and vllm.vllm.max_num_seqs == 4
    with pytest.raises(UsageError, match="vLLM sides take max_num_seqs"):
        with_setting(parse_side("vllm:none", "--baseline"), sweep, 2)
    with pytest.raises(UsageError, match="not a deployment ab starts"):
        with_setting(parse_side("http://127.0.0.1:9", "--baseline"), sweep, 2)
    with pytest.raises(UsageError, match=r"parallel=1\.5: a whole number"):
        with_setting(
            parse_side("llama:none", "--baseline"), parse_server_sweep("parallel=1.5"), 1.5
        )
    with pytest.raises(UsageError, match="not a numeric simulator setting"):
        with_setting(parse_side("sim:spec", "--candidate"), parse_server_sweep("role=1"), 1)
    with pytest.raises(UsageError, match="expected SETTING=V,V"):
        parse_server_sweep("parallel=1,1")


def test_the_flag_needs_a_sweep_or_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ab", str(_scenario(tmp_path)), "--baseline", "sim:none", "--candidate", "sim:spec"]
    assert main([*argv, "--server-sweep", "max_running=2,4", "--check"]) == 2
    assert "--server-sweep runs a --sweep or a --search per value" in capsys.readouterr().err
    argv += ["--search", "concurrency=1..8", "--server-sweep", "max_running=2,4", "--check"]
    assert main(argv) == 0
    assert "server setting sweep: max_running = 2, 4, a fresh server per run" in (
        capsys.readouterr().out
    )


def effort_scenario(tmp_path: Path) -> Path:
    """One category (``think``) of prompts, 12 requests, on the built-in simulator
    reasoning 16 tokens (at medium effort) ~3 ms apart before each answer."""
    path = tmp_path / "effort.toml"
    prompts = ", ".join(f'"question {i}"' for i in range(10))
    path.write_text(
        'name = "effort"\nmax_tokens = 48\n'
        f'[[sources]]\nkind = "inline"\ncategory = "think"\nprompts = [{prompts}]\n'
        "[load]\nconcurrency = 1\nrequests = 12\nwarmup_s = 0\n"
        "[sim]\nttft_ms = 5.0\nitl_ms = 3.0\nttft_sigma = 0.05\nitl_sigma = 0.05\n"
        "min_output_fraction = 1.0\nreasoning_tokens = 16\nreasoning_sigma = 0.0\n"
    )
    return path


def test_a_request_field_is_a_dimension_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--sampling-sweep reasoning_effort=low,high``: every request of both sides carries
    the value; the simulator reasons 0.5x and 2x its mean, so the decision of each value
    judges a reasoning category on TTFA, and the baseline's TTFA moves with the effort."""
    path = effort_scenario(tmp_path)
    out = tmp_path / "out"
    argv = ["ab", str(path), "--baseline", "sim:none", "--candidate", "sim:spec", "--out"]
    argv += [str(out), "--sweep", "concurrency=1", "--repeat", "2"]
    code = main([*argv, "--sampling-sweep", "reasoning_effort=low,high"])
    printed = capsys.readouterr().out
    assert code in (0, 1), printed
    (folder,) = out.iterdir()
    result: ServerSweepResult = orjson.loads((folder / "server-sweep.json").read_bytes())
    assert result["setting"] == "reasoning_effort" and result["request"] is True
    ttfa = {}
    for setting in result["values"]:
        (sweep_folder,) = Path(setting["folder"]).iterdir()
        d = load_decision(sweep_folder)
        (row,) = [r for r in d["rows"] if r["category"] == "think"]
        assert row["rule"] == "reasoning" and row["deciding"] == ["ttfa_ms", "answer_ms"]
        median = row["steps"][0]["cells"][0]["a"]
        assert median is not None
        ttfa[setting["value"]] = median
        for runs in Path(d["steps"][0]["folder"], "baseline").iterdir():
            lines = (runs / "requests.jsonl").read_bytes().splitlines()
            tokens = {orjson.loads(x)["reasoning_tokens"] for x in lines}
            assert tokens == {8 if setting["value"] == "low" else 32}, tokens
    # 8 against 32 reasoning tokens ~3 ms apart before the first answer token.
    assert ttfa["high"] > 2.5 * ttfa["low"], ttfa
    assert "request field reasoning_effort: where the candidate stops paying" in printed
