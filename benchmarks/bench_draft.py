"""Speculative decoding on llama.cpp: baseline, n-gram, early-exit draft and self-draft.

    python -m benchmarks.bench_draft                 # 3 requests per category, ~5 minutes
    python -m benchmarks.bench_draft --requests 2 --max-tokens 24 --json out.json

Each mode starts its own ``loadtest serve-llama`` (timed to ready and to a first token),
then sends, one at a time, a few prompts of each shipped scenario's sources (tool calls,
code, reasoning, multilingual) at temperature 0, while the server's resident memory and,
where the machine exposes it, the energy are measured. It prints per mode: TTFT, TPOT
and end-to-end p50/p95, the acceptance per category from llama.cpp's own per-response
counters, RSS steady/peak and what the draft adds over the baseline, cold start, energy
(or why not) and whether each output equals the baseline's (divergent prompts listed).
Requests go one at a time so that batching across requests cannot change a greedy
output. A draft mode can still diverge from the baseline where every draft is accepted
(the self-draft did, on 2 of 12 prompts): verification scores several tokens in one
batch, whose kernels round differently from one-token decoding, and a near tie flips.
RSS counts a file mapped twice twice: the self-draft's figure overstates its real cost.
Needs the extra ``loadtest[llama]``. A benchmark: it prints figures, asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import tempfile
import tomllib
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loadtest.app.engines.llama import MODEL_ALIAS, LlamaOptions, llama_command
from loadtest.config.scenario import Scenario, parse_scenario
from loadtest.datasets import build_pool
from loadtest.engine.runner import RunConfig, Runner
from loadtest.features.deployment_cost import (
    ColdStart,
    EnergyMeter,
    EnergyUse,
    MemoryUse,
    RssSampler,
    measure_cold_start,
)

SCENARIOS = Path(__file__).resolve().parent.parent / "scenarios"
CATEGORIES = ("tool-calls", "code", "reasoning", "multilingual")
MODES = (("baseline", "none"), ("n-gram", "ngram"), ("early-exit", "draft"), ("self-draft", "self"))


@dataclass(frozen=True, slots=True)
class ModeResult:
    """One mode's figures."""

    mode: str
    cold: ColdStart
    memory: MemoryUse
    energy: EnergyUse
    latency_ms: dict[str, tuple[float, float]]
    """ttft/tpot/e2e -> (p50, p95)."""
    acceptance: dict[str, float | None]
    """Per category: accepted / drafted from llama.cpp's per-response timings."""
    outputs: dict[str, str | None]
    """prompt id -> digest of the answer."""
    failed: int


def _scenario(category: str, requests: int, max_tokens: int) -> Scenario:
    raw = tomllib.loads((SCENARIOS / f"{category}.toml").read_text())
    sources = []
    for src in raw["sources"]:
        src = dict(src)
        if src["kind"] == "sharegpt":
            # Long ShareGPT prompts take minutes of prefill on two shared CPU cores.
            src["max_prompt_chars"] = min(int(src.get("max_prompt_chars", 1500)), 1500)
        sources.append(src)
    return parse_scenario(
        {
            "name": f"bench-draft-{category}",
            "api": raw.get("api", "chat"),
            "max_tokens": max_tokens,
            "seed": 7,
            "sampling": {"temperature": 0.0},
            "sources": sources,
            "load": {"mode": "closed", "concurrency": 1, "requests": requests, "grace_s": 120},
            "timeouts": {"first_byte_s": 300, "between_chunks_s": 120, "total_s": 600},
        },
        f"{category}.toml",
        SCENARIOS,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pct(values: list[float]) -> tuple[float, float]:
    if not values:
        return (float("nan"), float("nan"))
    p50, p95 = np.percentile(values, [50, 95])
    return (round(float(p50), 1), round(float(p95), 1))


async def _mode(name: str, spec: str, args: argparse.Namespace, tmp: Path) -> ModeResult:
    port = _free_port()
    opts = LlamaOptions(port=port, spec=spec, threads=args.threads, parallel=1)
    url = f"http://127.0.0.1:{port}"
    cold, proc = await measure_cold_start(llama_command(opts), url, MODEL_ALIAS)
    sampler = RssSampler(proc.pid, interval_s=0.1).start()
    meter = EnergyMeter().start()
    rows: list[dict[str, Any]] = []
    try:
        for category in CATEGORIES:
            sc = _scenario(category, args.requests, args.max_tokens)
            pool, _ = build_pool(sc)
            run_dir = tmp / name / category
            config = RunConfig(
                scenario=sc,
                endpoint=f"http://127.0.0.1:{port}",
                model=MODEL_ALIAS,
                run_dir=run_dir,
                record_outputs=True,
            )
            await Runner(config, pool).run()
            with (run_dir / "requests.jsonl").open() as f:
                rows += [{**json.loads(line), "category": category} for line in f]
    finally:
        memory, energy = sampler.stop(), meter.stop()
        proc.terminate()
        proc.wait(30)
    ok = [r for r in rows if r["outcome"] == "ok"]
    drafted: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in ok:
        t = r.get("server_timings") or {}
        if isinstance(t.get("draft_n"), int):
            drafted[r["category"]][0] += t["draft_n"]
            drafted[r["category"]][1] += t["draft_n_accepted"]
    return ModeResult(
        mode=name,
        cold=cold,
        memory=memory,
        energy=energy,
        latency_ms={
            "ttft": _pct([r["ttft_ms"] for r in ok if r.get("ttft_ms") is not None]),
            "tpot": _pct([r["tpot_ms"] for r in ok if r.get("tpot_ms") is not None]),
            "e2e": _pct([r["e2e_ms"] for r in ok if r.get("e2e_ms") is not None]),
        },
        acceptance={
            c: round(drafted[c][1] / drafted[c][0], 3) if drafted[c][0] else None
            for c in CATEGORIES
        },
        outputs={f"{r['category']}:{r['prompt_id']}": r.get("output_sha256") for r in ok},
        failed=len(rows) - len(ok),
    )


def _table(results: list[ModeResult]) -> str:
    base = results[0]
    mb = 1024 * 1024
    lines = [
        "| mode | TTFT p50/p95 ms | TPOT p50/p95 ms | e2e p50/p95 ms | acceptance "
        + "/".join(CATEGORIES)
        + " | RSS steady/peak MB (vs baseline) | ready / first token s | energy | "
        "same output as baseline | failed |",
        "|---" * 10 + "|",
    ]
    for r in results:
        acc = "/".join("-" if a is None else f"{a:.2f}" for a in r.acceptance.values())
        extra = (r.memory.steady_bytes - base.memory.steady_bytes) / base.memory.steady_bytes
        first = "-" if r.cold.first_token_s is None else f"{r.cold.first_token_s:.1f}"
        energy = (
            f"{r.energy.joules:.0f} J ({r.energy.source})"
            if r.energy.joules is not None
            else "not available"
        )
        same = [k for k, v in r.outputs.items() if base.outputs.get(k) == v]
        diverged = sorted(k for k in r.outputs if k not in same)
        lat = " | ".join(f"{p50:.0f}/{p95:.0f}" for p50, p95 in r.latency_ms.values())
        lines.append(
            f"| {r.mode} | {lat} | {acc} | {r.memory.steady_bytes / mb:.0f}/"
            f"{r.memory.peak_bytes / mb:.0f} ({extra:+.0%}) | {r.cold.ready_s:.1f} / {first} "
            f"| {energy} | {len(same)}/{len(r.outputs)}"
            + (f" (diverged: {', '.join(diverged)})" if diverged else "")
            + f" | {r.failed} |"
        )
    if base.energy.joules is None:
        lines.append(f"\nenergy: {base.energy.reason}")
    return "\n".join(lines)


async def _main(args: argparse.Namespace) -> list[ModeResult]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in MODES:
            if args.modes and name not in args.modes:
                continue
            print(f"running {name} ...", flush=True)
            results.append(await _mode(name, spec, args, Path(tmp)))
    return results


def main() -> None:
    """Parse the flags and run the benchmark."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    p.add_argument("--requests", type=int, default=3, help="requests per category")
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--modes", nargs="*", help="a subset, e.g. baseline self-draft")
    p.add_argument("--json", help="also write the figures to this file")
    args = p.parse_args()
    results = asyncio.run(_main(args))
    print(_table(results))
    if args.json:
        Path(args.json).write_text(json.dumps([asdict(r) for r in results], indent=1))


if __name__ == "__main__":
    main()
