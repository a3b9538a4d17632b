"""Long contexts: ingest per CPU-second with 32k-token prompts and 256 KB SSE lines.

    flock /tmp/bench.lock python -m benchmarks.bench_long            # ~1 minute
    flock /tmp/bench.lock python -m benchmarks.bench_long --seconds 3 --rounds 3
    flock /tmp/bench.lock python -m benchmarks.bench_long --cases prompt32k --alternate 6

A figure to read, not a test: nothing here asserts a speed. Against the simulator in its
own process (flat load model, no delays), each case runs loadtest's whole record path
(every chunk stamped and parsed, every record written to requests.jsonl) and then a
plain aiohttp line reader as the yardstick, for the same seconds at the same
concurrency. The driver's CPU is its own getrusage, as in ``bench_client``'s ingest.

Cases (``short`` is the baseline of ``prompt32k``, ``short16`` that of ``lines256k``,
so that a pair differs in one thing only):

- ``short``: a short prompt, 256 one-word chunks an answer.
- ``prompt32k``: a 32k-token prompt (131,072 characters, a ~128 KB body), 256 chunks.
- ``short16``: a short prompt, 16 one-word chunks an answer.
- ``lines256k``: a short prompt, 16 chunks of 256 KB each (``--piece-bytes``).

Every answer is checked: each of its token chunks arrived and parsed, and its usage
agrees (``incomplete`` counts the answers that fail). With digests, every byte too: the
simulator's answer is a function of the request's bytes and its seed, so the digest of
each answer loadtest received is compared with that of the simulator's own plan for its
prompt. ``resent`` is the client's resends on a fresh connection; ``server_saw``
is the requests the simulator received, beside ``records``, loadtest's answers.

``loadtest`` is the default record path; ``loadtest_digests`` the same with every answer
kept and digested (``--record-outputs``), which the byte-for-byte check needs.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import statistics
import time
from dataclasses import dataclass, replace
from typing import Any

import aiohttp
import orjson

from benchmarks.bench_client import FAST_SIM, _cpu, _plain_reader, _run, _scenario, _sim_cpu
from loadtest.config.scenario import Scenario
from loadtest.datasets import build_pool
from loadtest.engine.request_unit import prompt_body
from loadtest.model.record import RequestRecord
from loadtest.sim import SimConfig, SimProcess
from loadtest.sim.model import plan_response
from loadtest.transport.outcome import describe

LINE_BYTES = 256 << 10
PROMPT_CHARS = 32768 * 4  # the simulator counts four characters a token
_FAST = replace(FAST_SIM, prefill_chunk_tokens=0)


@dataclass(frozen=True, slots=True)
class Case:
    """One shape of load: its prompts, the answer's length and its pieces' size."""

    name: str
    baseline: str
    prompt_chars: int
    tokens: int
    piece_bytes: int


CASES = (
    Case("short", "short", 0, 256, 0),
    Case("prompt32k", "short", PROMPT_CHARS, 256, 0),
    Case("short16", "short16", 0, 16, 0),
    Case("lines256k", "short16", 0, 16, LINE_BYTES),
)


def _prompts(chars: int, n: int = 16) -> list[str]:
    """``n`` distinct prompts of ``chars`` characters (short ones for 0)."""
    if not chars:
        return [f"bench prompt {i}" for i in range(n)]
    filler = "the client measures every gap between tokens " * (chars // 40 + 1)
    return [(f"long prompt {i} " + filler)[:chars] for i in range(n)]


def _expected(sc: Scenario, sim: SimConfig) -> dict[str, str]:
    """Prompt id -> SHA-256 of the answer the simulator plans for it (as loadtest's
    ``output_sha256`` digests an answer without tool calls)."""
    pool, _ = build_pool(sc)
    out = {}
    for prompt in pool.prompts():
        body = prompt_body(sc, "sim-llm", prompt)
        plan = plan_response(sim, body, orjson.loads(body))
        out[prompt.id] = hashlib.sha256("".join(plan.pieces).encode()).hexdigest()
    return out


async def _server_saw(url: str) -> int:
    async with aiohttp.ClientSession() as s, s.get(url + "/sim/truth") as r:
        return len(orjson.loads(await r.read()))


def _loadtest(
    case: Case, sim: SimProcess, seconds: float, concurrency: int, digests: bool
) -> dict[str, Any]:
    """One timed loadtest run of ``case``; with ``digests``, every answer is kept and
    its digest checked against the simulator's plan (``--record-outputs``)."""
    prompts = _prompts(case.prompt_chars)
    sc = _scenario(
        {"mode": "closed", "concurrency": concurrency, "duration_s": seconds}, case.tokens, prompts
    )
    expected = _expected(sc, sim.config) if digests else {}
    records: list[RequestRecord] = []
    resent: list[int] = []
    saw0 = asyncio.run(_server_saw(sim.url))
    cpu0, t0, sim0 = _cpu(), time.perf_counter(), _sim_cpu(sim)
    asyncio.run(_run(sc, sim.url, records, record_outputs=digests, resent=resent))
    cpu, wall = _cpu() - cpu0, time.perf_counter() - t0
    sim_cpu = _sim_cpu(sim) - sim0
    saw = asyncio.run(_server_saw(sim.url)) - saw0
    chunks = sum(r.chunks for r in records)
    ok = [r for r in records if r.outcome == "ok"]
    # Every token chunk arrived and parsed, the usage agrees, and (with digests) every
    # byte of the answer is the simulator's.
    incomplete = sum(
        len(r.token_chunk_ns) != case.tokens
        or r.output_tokens != case.tokens
        or (digests and r.output_sha256 != expected.get(r.prompt_id))
        for r in ok
    )
    # Chunks that arrived in one read share its stamp: how many a read carried, which
    # moves the cost per chunk (a busy driver finds more waiting, and pays less each).
    stamps = [r.token_chunk_ns for r in ok]
    per_read = sum(map(len, stamps)) / max(1, sum(len(set(t)) for t in stamps))
    return {
        "records": len(records),
        "server_saw": saw,
        "failed": len(records) - len(ok),
        "incomplete": incomplete,
        "resent": sum(resent),
        "chunks": chunks,
        "chunks_per_cpu_s": round(chunks / cpu),
        "chunks_per_wall_s": round(chunks / wall),
        "driver_cpu_share": round(cpu / wall, 3),
        "sim_cpu_share": round(sim_cpu / wall, 3),
        "token_chunks_per_read": round(per_read, 2),
        "answer_mib_per_cpu_s": round(
            len(ok) * case.tokens * max(case.piece_bytes, 5) / cpu / 2**20, 1
        ),
    }


def _plain(case: Case, sim: SimProcess, seconds: float, concurrency: int) -> dict[str, Any]:
    content = _prompts(case.prompt_chars, 1)[0]
    # aiohttp's default read_bufsize (64 KiB) refuses a line over 128 KiB: 4 MiB, as
    # vLLM's client took for long contexts (vllm-project/vllm#40050).
    cpu0, t0 = _cpu(), time.perf_counter()
    lines = asyncio.run(
        _plain_reader(sim.url, concurrency, seconds, case.tokens, content, read_bufsize=4 << 20)
    )
    cpu, wall = _cpu() - cpu0, time.perf_counter() - t0
    return {
        "chunks": lines,
        "chunks_per_cpu_s": round(lines / cpu),
        "chunks_per_wall_s": round(lines / wall),
        "driver_cpu_share": round(cpu / wall, 3),
    }


def _default_bufsize(sim: SimProcess, tokens: int) -> str:
    """What aiohttp's line reader with its default buffer makes of this case's lines."""
    try:
        n = asyncio.run(_plain_reader(sim.url, 1, 0.05, tokens))
    except Exception as exc:  # aiohttp 3.14: LineTooLong; 3.13: ValueError
        return describe(exc).replace("\n", " ")[:160]
    return f"ok ({n} lines)"


def bench(
    seconds: float, concurrency: int, cases: tuple[Case, ...] = CASES, itl_ms: float = 0.0
) -> dict[str, Any]:
    """Every case once: loadtest, then the plain reader, each against a fresh simulator."""
    out: dict[str, Any] = {}
    for case in cases:
        cfg = replace(_FAST, piece_bytes=case.piece_bytes, itl_ms=itl_ms)
        with SimProcess(cfg) as sim:
            load0 = os.getloadavg()[0]
            row: dict[str, Any] = {
                "loadtest": _loadtest(case, sim, seconds, concurrency, digests=False),
                "loadtest_digests": _loadtest(case, sim, seconds, concurrency, digests=True),
                "plain_aiohttp": _plain(case, sim, seconds, concurrency),
            }
            if case.piece_bytes:
                row["plain_aiohttp_default_bufsize"] = _default_bufsize(sim, case.tokens)
            row["loadavg_1m"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
        out[case.name] = row
    for case in cases:
        row, base = out[case.name], out[case.baseline]
        for who in ("loadtest", "loadtest_digests", "plain_aiohttp"):
            ratio = row[who]["chunks_per_cpu_s"] / base[who]["chunks_per_cpu_s"]
            row[who]["ratio_to_" + case.baseline] = round(ratio, 3)
        row["loadtest_vs_plain"] = round(
            row["loadtest"]["chunks_per_cpu_s"] / row["plain_aiohttp"]["chunks_per_cpu_s"], 2
        )
    return out


def alternate(
    case: Case, pairs: int, seconds: float, concurrency: int, itl_ms: float = 0.0
) -> dict[str, Any]:
    """``case`` and its baseline, loadtest's default path, in ``pairs`` back-to-back
    pairs against one simulator (the order flips each pair), so that the machine's
    drift between cases is mostly shared; the ratio of each pair, and their median."""
    base = next(c for c in CASES if c.name == case.baseline)
    if base.piece_bytes != case.piece_bytes:
        raise SystemExit(f"{case.name} and {base.name} need different simulators")
    ratios, rows = [], []
    with SimProcess(replace(_FAST, piece_bytes=case.piece_bytes, itl_ms=itl_ms)) as sim:
        for i in range(pairs):
            order = (base, case) if i % 2 == 0 else (case, base)
            got = {c.name: _loadtest(c, sim, seconds, concurrency, digests=False) for c in order}
            ratios.append(
                round(got[case.name]["chunks_per_cpu_s"] / got[base.name]["chunks_per_cpu_s"], 3)
            )
            rows.append(got | {"loadavg_1m": round(os.getloadavg()[0], 2)})
    return {
        "case": case.name,
        "baseline": base.name,
        "ratios": ratios,
        "median_ratio": statistics.median(ratios),
        "pairs": rows,
    }


def main() -> None:
    """Run the cases ``--rounds`` times and print the figures as JSON."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0, help="per case and client")
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument(
        "--itl-ms",
        type=float,
        default=0.0,
        help="the simulator's token gap (0: as fast as it writes, so a busy driver finds "
        "several chunks a read; a gap keeps one chunk a read in every case)",
    )
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument(
        "--cases",
        default=",".join(c.name for c in CASES),
        help="which cases (each with its baseline)",
    )
    ap.add_argument(
        "--alternate",
        type=int,
        default=0,
        metavar="PAIRS",
        help="instead: each named case beside its baseline in PAIRS alternating pairs",
    )
    args = ap.parse_args()
    names = set(args.cases.split(","))
    names |= {c.baseline for c in CASES if c.name in names}
    cases = tuple(c for c in CASES if c.name in names)
    if args.alternate:
        for case in cases:
            if case.name != case.baseline:
                got = alternate(case, args.alternate, args.seconds, args.concurrency, args.itl_ms)
                print(json.dumps(got, indent=2), flush=True)
        return
    rounds = []
    for i in range(args.rounds):
        result = bench(args.seconds, args.concurrency, cases, args.itl_ms)
        rounds.append(result)
        print(json.dumps({"round": i + 1, **result}, indent=2), flush=True)
    summary: dict[str, Any] = {}
    for case in cases:
        rows = [r[case.name] for r in rounds]
        summary[case.name] = {
            f"{who}_{what}": [row[who][key] for row in rows]
            for who in ("loadtest", "loadtest_digests", "plain_aiohttp")
            for what, key in (
                ("chunks_per_cpu_s", "chunks_per_cpu_s"),
                ("ratio", "ratio_to_" + case.baseline),
            )
        } | {
            "incomplete_failed_resent": [
                [
                    row[who][k]
                    for who in ("loadtest", "loadtest_digests")
                    for k in ("incomplete", "failed", "resent")
                ]
                for row in rows
            ],
            "loadavg_1m": [row["loadavg_1m"] for row in rows],
        }
    print(json.dumps({"summary": summary}, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rounds": rounds, "summary": summary}, f, indent=2)


if __name__ == "__main__":
    main()
