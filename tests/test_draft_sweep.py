"""``ab --sweep ... --draft-max``: every draft length a candidate, and the best K named.

Against the simulator as ``sim:none`` / ``sim:spec`` sides (the scenario's ``[sim]``),
whose load model makes one K designed-best; and, pure, the rule that names a best K
only where it is told apart from every other.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from loadtest.cli.main import main
from loadtest.model.io import load_decision
from loadtest.report.decision import RunSamples, Step, decide
from loadtest.sim.load import tokens_per_verify_step
from tests.test_ab_sweep import only_decision

# Per token, a verify step of one sequence costs (VERIFY + SHARE * K) / m(K) of a plain
# step (m = 1 + p + ... + p^K tokens a step), plus the draft's round trip, the same for
# every K: a short draft drafts too little, a long one pays for tokens it loses.
SHARE, ACCEPT, VERIFY, KS = 0.15, 0.8, 1.0, (1, 4, 16)
SIM = f"""[sim]
ttft_ms = 5.0
itl_ms = 8.0
ttft_sigma = 0.1
itl_sigma = 0.1
min_output_fraction = 1.0
step_token_share = {SHARE}
accept_chat = {ACCEPT}
verify_factor = {VERIFY}
draft_token_ms = 0.1
"""


def per_token(k: int) -> float:
    """The model's cost of a token at concurrency 1, relative to plain decoding."""
    return (VERIFY + SHARE * k) / tokens_per_verify_step(ACCEPT, k)


@pytest.mark.quiet  # K=16's interval is wide: its accepted run lengths vary most
def test_the_designed_best_draft_length_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    designed = min(KS, key=per_token)
    costs = [round(per_token(k), 3) for k in KS]
    assert designed == 4 and costs == [0.639, 0.476, 0.696]  # 25% and 31% apart
    prompts = ", ".join(f'"prompt {i}"' for i in range(8))
    path = tmp_path / "k.toml"
    path.write_text(
        'name = "k"\nmax_tokens = 64\n'
        f'[[sources]]\nkind = "inline"\ncategory = "chat"\nprompts = [{prompts}]\n'
        "[load]\nconcurrency = 1\nrequests = 14\nwarmup_s = 0\n[slo]\ne2e_ms.p99 = 10000\n" + SIM
    )
    out = tmp_path / "out"
    argv = ["ab", str(path), "--baseline", "sim:none", "--candidate", "sim:spec"]
    argv += ["--draft-max", ",".join(map(str, KS)), "--sweep", "concurrency=1"]
    assert main([*argv, "--repeat", "2", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    d = only_decision(out)
    # One row per category per K, each against the one baseline.
    assert [(r["category"], r.get("draft_max")) for r in d["rows"]] == [
        ("chat", 1),
        ("whole mix", 1),
        ("chat", 4),
        ("whole mix", 4),
        ("chat", 16),
        ("whole mix", 16),
    ]
    draft = d.get("draft")
    assert draft is not None and draft["values"] == list(KS)
    assert draft["setting"].startswith("simulator spec_k")
    (pick,) = draft["picks"]
    assert pick["metric"] == "e2e_ms" and pick["load"] == 1
    # Measured (2 runs x 14 requests of 64 tokens a side): K=1 +41% [30,48], K=16 +50%
    # [24,65] slower than K=4. With 32 tokens K=16's interval reached down to +20% once
    # a finished sequence no longer lingered in the engine's batch (it had slowed the
    # next request's prefill and first steps, K=16's most), and two suite runs in three
    # could not tell K=16 from K=4: its accepted run lengths vary most, and 64 tokens
    # average twice as many of them per request.
    assert pick["best"] == designed and pick["tied"] == [designed], pick["text"]
    assert {p["k"] for p in pick["pairs"]} == {1, 16}
    assert all(p["cell"]["verdict"] == "slower" for p in pick["pairs"])
    # The family holds every tested cell and the pair tests: 3 Ks x (e2e, TPOT) + 2
    # pairs always, and each K's goodput where its runs differ at all (a simulator's
    # runs of 14 requests can give the same goodput to the millisecond: CI once saw it).
    cells = [c for r in d["rows"] for st in r["steps"] for c in st["cells"]]
    latency = [c for c in cells if c["metric"] in ("e2e_ms", "tpot_ms")]
    assert len(latency) == 6 and all(c["p_value"] is not None for c in latency)
    goodput = [c for c in cells if c["metric"] == "goodput_per_s"]
    untested = [c for c in goodput if c["p_value"] is None]
    assert len(goodput) == 3
    assert all(c["why"] == "no spread between runs to test against" for c in untested)
    assert d["family_size"] == 6 + 2 + len(goodput) - len(untested)
    assert "chat K=4" in printed and "concurrency 1, chat: K=4 fastest" in printed
    # Every K's runs and comparison are kept in the step's folder.
    step = Path(d["steps"][0]["folder"])
    for k in KS:
        assert (step / f"comparison-candidate-k{k}.json").exists()
        assert len(list((step / f"candidate-k{k}").iterdir())) == 2
    assert load_decision(out / next(out.iterdir()).name)["draft"] == draft


def test_draft_max_needs_a_speculative_side_ab_starts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "k.toml"
    path.write_text('name = "k"\n[[sources]]\nkind = "inline"\nprompts = ["a"]\n')
    argv = ["ab", str(path), "--sweep", "concurrency=1", "--check"]
    assert main([*argv, "--candidate", "http://127.0.0.1:9", "--draft-max", "1,4"]) == 2
    assert "not a speculative deployment ab starts" in capsys.readouterr().err
    assert main([*argv, "--candidate", "sim:none", "--draft-max", "1,4"]) == 2
    assert main([*argv, "--candidate", "sim:spec", "--draft-max", "0,4"]) == 2
    assert "each >= 1" in capsys.readouterr().err
    assert main(["ab", str(path), "--candidate", "sim:spec", "--draft-max", "2", "--check"]) == 2
    assert "give --sweep too" in capsys.readouterr().err
    assert main([*argv, "--candidate", "sim:spec", "--draft-max", "1,4"]) == 0
    text = capsys.readouterr().out
    assert "1 concurrency step (1) x 3 sides x 2 repeats = 6 runs" in text
    assert "candidates sim:spec K=1, sim:spec K=4" in text


def _samples(rng: np.random.Generator, median: float, n: int = 40) -> RunSamples:
    e2e = median * np.exp(rng.normal(0.0, 0.05, n))
    return RunSamples({"chat": {"e2e_ms": e2e, "tpot_ms": e2e / 30}}, {"chat": n})


def test_ks_that_cannot_be_told_apart_are_said_so() -> None:
    rng = np.random.default_rng(7)
    # K=1 and K=2 alike (100 ms), K=8 30% slower: no best K, two tied, K=8 slower.
    runs = {k: [_samples(rng, m) for _ in range(2)] for k, m in ((1, 100), (2, 100), (8, 130))}
    base = [_samples(rng, 150) for _ in range(2)]
    d = decide("concurrency", [Step(1, base, [], draft=runs)], repeat=2, resamples=1000)
    draft = d.get("draft")
    assert draft is not None
    (pick,) = draft["picks"]
    assert pick["best"] is None and pick["tied"] == [1, 2], pick["text"]
    assert "K=1, K=2 indistinguishable on e2e" in pick["text"]
    assert "slower than K=" in pick["text"] and "K=8 e2e +" in pick["text"]
    assert [r.get("draft_max") for r in d["rows"]] == [1, 1, 2, 2, 8, 8]
