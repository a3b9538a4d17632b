"""The workloads against llama.cpp (not a test: prints figures, asserts nothing).

    python -m benchmarks.bench_workloads_llama
    python -m benchmarks.bench_workloads_llama --requests 20 --conversations 4

Needs the ``llama`` extra. Starts ``loadtest serve-llama`` (2 slots) and prints:

(a) exact lengths: ``--requests`` synthetic prompts (input drawn uniformly from 32 to
    256 tokens, cut with the server's /tokenize; output fixed at 16 with ``ignore_eos``
    and ``min_tokens``), on the completions API and on chat: how many prompts the server
    counted at the intended length (as is, and less its BOS token), how many answers came
    out at exactly 16 tokens, and the chat template's overhead;
(b) TTFT by turn number for a few short ShareGPT conversations of 3-4 turns, replayed
    one at a time with their recorded answers (the same bytes every run), with llama.cpp's
    prompt cache on and then off (``[sampling] cache_prompt = false``).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import orjson

from loadtest.app.engines.llama import MODEL_ALIAS, LlamaOptions, llama_command
from loadtest.config.scenario import Scenario, parse_scenario
from loadtest.datasets.conversations import load_conversations
from loadtest.engine.runner import RunConfig, Runner
from loadtest.features.workload import workload_for
from loadtest.model.json import JsonObject

BOS = 1
"""llama.cpp starts every prompt with ``<bos>``; its /tokenize (add_special off) does not."""
OUT_TOKENS = 16


def start_llama() -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    cmd = llama_command(LlamaOptions(port=port))
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit("serve-llama exited before it was ready")
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            pass
        time.sleep(0.3)
    proc.kill()
    raise SystemExit("serve-llama was not ready in 300 s")


def scenario(sources: list[JsonObject], load: JsonObject, **top: object) -> Scenario:
    data: JsonObject = {
        "name": "bench-workloads",
        "sources": sources,
        "load": {"mode": "closed", "grace_s": 300, **load},
        "timeouts": {"first_byte_s": 300},
        **top,
    }
    return parse_scenario(data, "bench.toml")


async def run(url: str, sc: Scenario, run_dir: Path) -> tuple[list[JsonObject], dict[str, int]]:
    """The run's request lines, and each exact-length prompt's intended input tokens."""
    wl = await asyncio.to_thread(workload_for, sc, url + "/v1", MODEL_ALIAS)
    assert wl is not None
    cfg = RunConfig(scenario=wl.scenario, endpoint=url, model=MODEL_ALIAS, run_dir=run_dir)
    await Runner(cfg, wl.pool, hooks=list(wl.hooks), unit=wl.unit).run()
    path = run_dir / "requests.jsonl"
    rows = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
    prompts = wl.pool.prompts() if wl.pool is not None else []
    intended = {p.id: p.input_tokens for p in prompts if p.input_tokens is not None}
    return rows, intended


async def exact_lengths(url: str, n: int, tmp: Path) -> None:
    src: JsonObject = {
        "kind": "synthetic",
        "input_tokens": {"dist": "uniform", "mean": 144, "min": 32, "max": 256},
        "output_tokens": OUT_TOKENS,
        "limit": n,
    }
    print(f"(a) exact lengths: {n} synthetic requests, input 32..256, output {OUT_TOKENS}")
    for api in ("completions", "chat"):
        sc = scenario(
            [src], {"concurrency": 2, "requests": n}, api=api, sampling={"temperature": 0.0}
        )
        rows, intended = await run(url, sc, tmp / api)
        report = orjson.loads((tmp / api / "workload.json").read_bytes())
        ok = [r for r in rows if r["outcome"] == "ok"]
        total = len(rows)
        out_exact = sum(r["output_tokens"] == OUT_TOKENS for r in ok)
        print(
            f"  {api:<11} ok {len(ok)}/{total}; input exact as counted "
            f"{report['exact_input']}/{total}, less BOS "
            f"{sum(r['prompt_tokens'] - BOS == intended[r['prompt_id']] for r in ok)}/{total}; "
            f"output exact {out_exact}/{total} (stopped early {report['stopped_early']}); "
            f"overhead median {report['prompt_overhead_median']}, "
            f"max {report['prompt_overhead_max']}"
        )


def conversations_file(path: Path, n: int) -> int:
    """Short packaged ShareGPT conversations of 3 turns or more, written as JSONL."""
    picked = []
    for c in load_conversations(None, None, seed=7, min_turns=3):
        turns = min(c.turns, 4)
        chars = sum(
            len(u) + len(a) for u, a in zip(c.users[:turns], c.answers[:turns], strict=True)
        )
        if chars < 2500:
            msgs = []
            for u, a in zip(c.users[:turns], c.answers[:turns], strict=True):
                msgs += [{"from": "human", "value": u}, {"from": "gpt", "value": a}]
            picked.append({"id": c.id, "conversations": msgs})
        if len(picked) == n:
            break
    path.write_bytes(b"".join(orjson.dumps(c) + b"\n" for c in picked))
    return len(picked)


async def ttft_by_turn(url: str, n: int, tmp: Path) -> None:
    convs = tmp / "convs.jsonl"
    got = conversations_file(convs, n)
    print(f"(b) TTFT by turn: {got} ShareGPT conversations of 3-4 turns, one at a time,")
    print("    recorded answers in the history, max_tokens 16")
    src: JsonObject = {
        "kind": "conversations",
        "path": str(convs),
        "answers": "recorded",
        "max_turns": 4,
    }
    for label, sampling in (
        ("cache on ", {"temperature": 0.0}),
        ("cache off", {"temperature": 0.0, "cache_prompt": False}),
    ):
        sc = scenario(
            [src], {"concurrency": 1, "requests": got}, max_tokens=OUT_TOKENS, sampling=sampling
        )
        run_dir = tmp / label.strip().replace(" ", "-")
        await run(url, sc, run_dir)
        table = orjson.loads((run_dir / "multiturn.json").read_bytes())
        cells = [
            f"t{t['turn']}: {t['ttft_p50_ms']:.0f} ms ({t['prompt_tokens_mean']:.0f} tok, "
            f"n={t['requests']})"
            for t in table["ttft_by_turn"]
        ]
        print(f"  {label} p50 " + "; ".join(cells))


async def main(requests: int, conversations: int) -> None:
    proc, url = start_llama()
    try:
        with tempfile.TemporaryDirectory() as d:
            await exact_lengths(url, requests, Path(d))
            await ttft_by_turn(url, conversations, Path(d))
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--conversations", type=int, default=4)
    args = ap.parse_args()
    asyncio.run(main(args.requests, args.conversations))
