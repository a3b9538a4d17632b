"""The server block of a run against the built-in speculative deployment: acceptance by
position, the prefix-cache hit rate and the server's own latency, read from its
``/metrics`` as from vLLM's; and the scrape at the end of a warm-up."""

from __future__ import annotations

import asyncio
import itertools
import math
import urllib.request
from pathlib import Path
from typing import Any, cast

import aiohttp
import orjson
import pytest

from loadtest.cli.main import main
from loadtest.features.scrape import Scraper
from loadtest.features.server_summary import summarize_samples
from loadtest.model.summary import Summary
from loadtest.report.server_lines import server_lines
from loadtest.sim import SimConfig
from loadtest.sim.process import InProcessSim, SpecDeployment

K = 4
P = 0.7
REQUESTS = 40
_SCENARIO = f"""
name = "positions"
max_tokens = 64
[[sources]]
kind = "inline"
category = "chat"
prompts = ["tell me a story about a cat", "what is the weather like", "say hello"]
[load]
mode = "closed"
concurrency = 4
requests = {REQUESTS}
[sim]
speculative = true
spec_k = {K}
accept_chat = {P}
itl_ms = 2.0
ttft_ms = 2.0
draft_timeout_ms = 2000.0
"""


def test_a_run_reads_acceptance_by_position_and_the_servers_latency(tmp_path: Path) -> None:
    path = tmp_path / "positions.toml"
    path.write_text(_SCENARIO)
    out = tmp_path / "out"
    assert main(["run", str(path), "--no-tui", "-q", "--out", str(out)]) == 0
    (run_dir,) = out.iterdir()
    summary = orjson.loads((run_dir / "summary.json").read_bytes())
    server = summary["server"]
    rows = [orjson.loads(line) for line in (run_dir / "metrics.jsonl").read_bytes().splitlines()]
    ok = [r for r in rows if r["ok"]]
    drafts = ok[-1]["drafts"] - ok[0]["drafts"]
    rates = server["accepted_per_position"]
    assert len(rates) == K and drafts > 0
    assert all(a >= b for a, b in itertools.pairwise(rates))
    for i, rate in enumerate(rates):
        # Each draft accepts position i with chance p^(i+1), independently of the other
        # drafts (each stream draws from its own seeded generator): the rate is a
        # binomial share with sd sqrt(q(1-q)/n). 4 sd (~900 drafts: 0.06 at position 0)
        # fails p = 0.6 or a position off by one (0.49 for 0.7), and by chance 1 in 15,000.
        q = P ** (i + 1)
        assert abs(rate - q) <= 4 * math.sqrt(q * (1 - q) / drafts), (i, rate, q)
    assert server["prefix_cache_hit_rate"] is None  # no prefix cache: nothing looked up
    # The server's histograms, read at the window's edges, counted this run's requests.
    assert server["histogram_requests"] == summary["requests"]["sent"] == REQUESTS
    assert 0 < server["ttft_ms"]["p50"] <= server["ttft_ms"]["p95"]
    assert 0 < server["itl_ms"]["p50"] <= server["itl_ms"]["p95"]
    assert "latency_note" not in server


async def test_the_scrape_at_the_end_of_the_warm_up_starts_the_window(tmp_path: Path) -> None:
    """With a warm-up the start edge is scraped when it ends: requests before it are not
    in the server's figures, those after are."""
    cfg = SimConfig(itl_ms=1.0, itl_sigma=0.0, ttft_ms=1.0)
    async with InProcessSim(cfg) as sim, aiohttp.ClientSession() as s:
        scraper = Scraper(sim.url + "/metrics", tmp_path / "metrics.jsonl", window_start_s=0.3)
        await scraper.start()
        await _ask(s, sim.url, 3)  # in the warm-up
        for _ in range(100):  # the edge is due 0.3 s after the start
            if any(r.get("edge") == "start" for r in scraper.samples):
                break
            await asyncio.sleep(0.02)
        await _ask(s, sim.url, 5)
        await scraper.close()
    edges = [r["edge"] for r in scraper.samples if "edge" in r]
    assert edges == ["start", "end"]
    assert scraper.samples[0].get("edge") is None  # the first scrape is not an edge here
    assert summarize_samples(scraper.samples)["histogram_requests"] == 5


async def _ask(s: aiohttp.ClientSession, url: str, n: int) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4}
    for _ in range(n):
        async with s.post(url + "/v1/chat/completions", json=body) as resp:
            assert resp.status == 200
            await resp.read()


def test_counters_are_read_between_the_window_edges() -> None:
    """The warm-up's drafts (before the start edge) are not in the block: acceptance
    once ran from the first scrape to the last while the latency tables left it out."""
    rows: list[dict[str, Any]] = [
        {"ok": True, "t_s": 0.0, "accepted_tokens": 0, "draft_tokens": 0, "drafts": 0},
        # the warm-up drafted 30 and had 30 accepted
        {"ok": True, "t_s": 3.0, "edge": "start", "accepted_tokens": 30, "draft_tokens": 30,
         "drafts": 10, "generation_tokens": 40, "finished_requests": 1},
        {"ok": True, "t_s": 9.0, "edge": "end", "accepted_tokens": 45, "draft_tokens": 60,
         "drafts": 20, "generation_tokens": 80, "finished_requests": 3},
    ]  # fmt: skip
    server = summarize_samples(rows)
    assert server["window"] == "measured"
    assert (server["accepted_tokens"], server["draft_tokens"], server["drafts"]) == (15, 30, 10)
    assert server["acceptance_rate"] == 0.5
    assert server["accepted_per_draft"] == 1.5
    # 40 tokens of 2 requests: 2 from their prefills, 15 accepted, so 23 decode steps.
    assert server["accepted_per_step"] == round(15 / 23, 4)
    no_edges = summarize_samples([{k: v for k, v in r.items() if k != "edge"} for r in rows])
    assert no_edges["window"] == "run" and no_edges["accepted_tokens"] == 45


def test_preemptions_are_counted_over_the_window_and_printed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Eight streams of ~6 prompt and 64 answer tokens on 200 tokens of KV: the answers
    # outgrow it, and the simulator preempts as vLLM does; reserving whole answers up
    # front instead, requests wait and none is preempted.
    scenario = _SCENARIO.replace("speculative = true", "kv_tokens = 200\nmin_output_fraction = 1.0")
    scenario = scenario.replace("concurrency = 4", "concurrency = 8")
    found = {}
    for preempt in (True, False):
        path = tmp_path / f"kv-{preempt}.toml"
        path.write_text(scenario + f"kv_preempt = {str(preempt).lower()}\n")
        out = tmp_path / f"out-{preempt}"
        assert main(["run", str(path), "--no-tui", "--out", str(out)]) == 0
        (run_dir,) = out.iterdir()
        server = orjson.loads((run_dir / "summary.json").read_bytes())["server"]
        rows = [orjson.loads(x) for x in (run_dir / "metrics.jsonl").read_bytes().splitlines()]
        edges = [r for r in rows if r.get("ok") and r.get("edge")]
        assert server["preemptions"] == edges[-1]["preemptions"] - edges[0]["preemptions"]
        assert f"preemptions {server['preemptions']}" in capsys.readouterr().out
        found[preempt] = server
    assert found[True]["preemptions"] > 0
    assert found[False]["preemptions"] == 0 and found[False]["waiting_peak"] > 0


def _hist(le: list[float], counts: list[float]) -> dict[str, Any]:
    return {"le": le, "counts": counts}


def test_a_server_figure_from_one_wide_bucket_is_printed_as_its_bucket() -> None:
    """vLLM's queue buckets start at 0-300 ms: all of a fast run's requests fall in the
    first, and the 150 / 285 that interpolation gives were printed as measurements, with
    a negative network time beside a server TTFT p50 from a 20-40 ms bucket."""
    queue_le, ttft_le = [0.3, 0.5, 0.8], [0.02, 0.04, 0.06, 0.08, 0.1, 0.25]
    start = {"queue": _hist(queue_le, [0, 0, 0, 0]), "ttft": _hist(ttft_le, [0] * 7)}
    end = {
        "queue": _hist(queue_le, [1257, 1257, 1257, 1257]),
        # 100 requests: 10 below 20 ms, 80 in 20-40 ms, 10 in 100-250 ms
        "ttft": _hist(ttft_le, [10, 90, 90, 90, 90, 100, 100]),
    }
    rows: list[dict[str, Any]] = [
        {"ok": True, "t_s": 0.0, "edge": "start", "histograms": start},
        {"ok": True, "t_s": 9.0, "edge": "end", "histograms": end},
    ]
    server = summarize_samples(rows)
    assert server["queue_ms"] == {"p50": 150.0, "p95": 285.0}  # the interpolation's guess
    assert server["resolution"]["queue"]["p50"] == {
        "lower_ms": 0.0,
        "upper_ms": 300.0,
        "holds": 1257,
    }
    summary = cast(
        Summary,
        {"server": server, "metrics": {"ttft_ms": {"count": 100, "p50": 38.0}}},
    )
    text = "\n".join(server_lines(summary))
    assert "queue < 300 ms: all 1,257 in the first bucket" in text
    assert "150.0" not in text and "285.0" not in text
    # The p50 (interpolated to 30) lies in a 20 ms-wide bucket: 38 - 30 is no network
    # time; the p95 (interpolated to 175) lies in one 150 wide, more than half of it.
    assert "minus server" not in text
    assert "cannot tell (client p50 38.0, the server's p50 only known to be 20-40 ms)" in text
    assert "p50 20-40  p95 100-250" in text
    assert "warm-up" not in text  # no warm-up: the window's counts are the measured ones
    # A p50 interpolated to 1421.9 in a 1000-1500 ms bucket was printed as a figure (the
    # bucket was under half of it) beside a client end-to-end p50 of 1267.7; a bucket
    # wider than a fifth of its figure is printed as the bucket.
    decode_le = [0.8, 1.0, 1.5, 2.5, 5.0]
    start["decode"] = _hist(decode_le, [0] * 6)
    end["decode"] = _hist(decode_le, [20, 60, 116, 180, 213, 213])
    decoded = summarize_samples(rows)
    guess = decoded["decode_ms"]["p50"]
    assert 1000 < guess < 1500 and guess / 2 > 500  # under half: printed before
    said = "\n".join(server_lines(cast(Summary, {**summary, "server": decoded})))
    assert "decode p50 1000-1500  p95 2500-5000" in said and f"{guess:.1f}" not in said
    # Where the difference is tellable it is given from the bucket the line prints, not
    # from the interpolation it no longer shows (150 - 40 to 150 - 20).
    far = cast(Summary, {**summary, "metrics": {"ttft_ms": {"count": 100, "p50": 150.0}}})
    assert "client p50 minus server p50 110.0 to 130.0 (network and client)" in "\n".join(
        server_lines(far)
    )
    # The engine's gaps take in tool-call streams, which the client's TPOT leaves out:
    # said where the run had any (a code run read "tool-call streams too").
    itl_le = [0.01, 0.025, 0.05]
    start["itl"], end["itl"] = _hist(itl_le, [0] * 4), _hist(itl_le, [400, 900, 1000, 1000])
    with_itl = cast(Summary, {**summary, "server": summarize_samples(rows)})
    (gaps,) = [x for x in server_lines(with_itl) if "server inter-token ms" in x]
    assert gaps.endswith("(the engine's)"), gaps
    calls = cast(Summary, {**with_itl, "tool_calls": {"responses_with_calls": 3}})
    (gaps,) = [x for x in server_lines(calls) if "server inter-token ms" in x]
    assert gaps.endswith("(the engine's, tool-call streams too)"), gaps
    # A warm-up request that ended inside the window is in the server's counts of it:
    # "all 28" stood beside 20 measured requests with no word of why.
    warm = cast(Summary, {**summary, "requests": {"warmup": 8}})
    (head,) = [line for line in server_lines(warm) if line.startswith("server (")]
    assert head.endswith(
        "counters over the measured window, each request counted where the server "
        "observed it (warm-up ones too)"
    ), head


_MIXED = """
name = "two populations"
max_tokens = 48
seed = 5
[[sources]]
kind = "bfcl"
category = "tool-calls"
subsets = ["simple_python"]
[[sources]]
kind = "inline"
category = "chat"
prompts = ["tell me a story about a cat", "what is the weather like", "say hi"]
[load]
mode = "closed"
concurrency = 4
requests = 60
warmup_s = 0
"""


def test_each_accepted_per_step_agrees_with_the_truth_of_the_streams_it_counts(
    tmp_path: Path,
) -> None:
    """The engine's figure is over every request, loadtest's over the text streams (a
    tool parser's bursts are not steps): each is checked against the simulator's own
    per-request truth of its population. loadtest's was the mean of each request's
    figure, which read 1.35 beside a true 0.76 (short answers weighed as much as long)."""
    cfg = SimConfig(
        spec_k=K,
        accept_chat=0.5,
        accept_tool_calls=0.9,
        itl_ms=3.0,
        itl_sigma=0.0,
        ttft_ms=2.0,
        draft_timeout_ms=2000.0,
    )
    path = tmp_path / "mixed.toml"
    path.write_text(_MIXED)
    out = tmp_path / "out"
    deployment = SpecDeployment(cfg)
    try:
        url, _ = deployment.start()
        argv = ["run", str(path), "--endpoint", url, "--no-tui", "-q", "--out", str(out)]
        assert main(argv) == 0
        with urllib.request.urlopen(url + "/sim/truth", timeout=10) as resp:
            truth = orjson.loads(resp.read())
    finally:
        deployment.stop()
    (run_dir,) = out.iterdir()
    summary = cast(Summary, orjson.loads((run_dir / "summary.json").read_bytes()))
    done = [t for t in truth if t["outcome"] == "ok" and t["steps"] >= 2]
    text = [t for t in done if t["category"] != "tool_calls"]
    assert len(text) >= 15 and len(done) - len(text) >= 15  # both populations were run

    def pooled(rows: list[dict[str, Any]]) -> float:
        tokens = sum(int(t["tokens_written"]) - 1 for t in rows)
        return tokens / sum(int(t["steps"]) - 1 for t in rows)

    ours = summary["decode_steps"]
    assert ours["streams"] == len(text)
    assert ours["tokens_per_step"] == pytest.approx(pooled(text), rel=0.05)
    server = summary["server"]
    assert server is not None
    every = sum(t["draft_accepted"] for t in done) / sum(t["steps"] - 1 for t in done)
    # The window runs from the first scrape to the last: a few steps at either edge.
    assert server["accepted_per_step"] == pytest.approx(every, rel=0.1)
    # The two populations differ (tool calls accept 0.9, chat 0.5): the printed line
    # says which is which instead of calling them one figure.
    assert abs((pooled(text) - 1) - every) > 0.2
    (line,) = [x for x in server_lines(summary) if "accepted per decode step" in x]
    assert "(all requests)" in line and f"{len(text)} text streams" in line
