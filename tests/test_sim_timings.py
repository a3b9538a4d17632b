"""The simulator's ``llama`` flavour: llama.cpp's ``timings`` on the last chunk, shaped as
the recorded llama.cpp streams have them and read by loadtest as it reads llama.cpp's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from loadtest.app.run.job import RunOptions, run_job
from loadtest.report.compare import compare_runs, load_run
from loadtest.sim import InProcessSim, SimConfig, SimProcess
from tests.conftest import read_jsonl

FIXTURES = Path(__file__).parent.parent / "fixtures"
LLAMA = SimConfig(
    ttft_ms=2.0, ttft_sigma=0.0, itl_ms=0.5, itl_sigma=0.0, flavour="llama", prefix_cache=True
)


def _recorded_keys() -> set[str]:
    """The ``timings`` keys of the recorded real llama.cpp stream."""
    for line in (FIXTURES / "llamacpp-chat.sse").read_text().splitlines():
        if line.startswith("data: {") and '"timings"' in line:
            return set(orjson.loads(line[6:])["timings"])
    raise AssertionError("the fixture has no timings")


async def _last(url: str, body: dict[str, Any]) -> dict[str, Any]:
    async with (
        aiohttp.ClientSession() as http,
        http.post(f"{url}/v1/chat/completions", json={**body, "stream": True}) as resp,
    ):
        raw = await resp.read()
    lines = [line[6:] for line in raw.split(b"\n") if line.startswith(b"data: {")]
    return dict(orjson.loads(lines[-1]))


async def test_the_llama_flavour_ends_with_timings_shaped_as_llama_cpp_sends_them() -> None:
    prompt = [{"role": "user", "content": "the same long question " * 40}]
    body = {"model": "sim-llm", "messages": prompt, "max_tokens": 12, "ignore_eos": True}
    usage = {"stream_options": {"include_usage": True}}
    async with InProcessSim(LLAMA) as sim:
        cold = await _last(sim.url, body | usage)
        warm = await _last(sim.url, body)  # no usage chunk: timings on the finish chunk
    async with InProcessSim(replace(LLAMA, flavour="vllm")) as sim:
        plain = await _last(sim.url, body | usage)
    assert "timings" not in plain
    assert set(cold["timings"]) == _recorded_keys()
    t = cold["timings"]
    assert t["predicted_n"] == 12 and t["cache_n"] == 0
    assert t["prompt_n"] == cold["usage"]["prompt_tokens"]
    assert t["prompt_ms"] > 0 and t["predicted_ms"] > 0
    assert warm["choices"][0]["finish_reason"] == "length"
    w = warm["timings"]
    assert w["cache_n"] > 0 and w["cache_n"] + w["prompt_n"] == t["prompt_n"]


def test_loadtest_reads_the_flavour_as_llama_cpp_and_sees_the_caches_differ(
    tmp_path: Path,
) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(
        'name = "cache"\nmax_tokens = 8\n[[sources]]\nkind = "inline"\n'
        f'prompts = ["{"one long shared question " * 30}"]\n'
        '[load]\nmode = "closed"\nconcurrency = 1\nrequests = 6\nwarmup_s = 0\n'
    )
    runs = []
    for name, cache in (("warm", True), ("cold", False)):
        with SimProcess(replace(LLAMA, prefix_cache=cache)) as sim:
            options = RunOptions(
                scenario=str(scenario),
                endpoint=sim.url,
                run_dir=str(tmp_path / name),
                tui=False,
                print_results=False,
            )
            summary, folder, _ = run_job(options)
        rows = read_jsonl(folder / "requests.jsonl")
        assert all(r["server_timings"]["predicted_n"] == r["output_tokens"] for r in rows)
        assert summary["server_timings"] is not None
        runs.append(load_run(folder))
    comparison = compare_runs([runs[0]], [runs[1]], resamples=200)
    kinds = [f["kind"] for f in comparison["findings"]]
    assert "prompt caches differ" in kinds, comparison["findings"]
    assert comparison["confounded"]
