"""Reasoning on real llama.cpp: Gemma 3 270M made to think by a grammar (#47).

The shipped model has no think block of its own. A GBNF grammar in the scenario's
``[sampling]`` (sent as-is; llama.cpp takes ``grammar`` per request) makes it write
``<think>...</think>`` and then an answer. Its chat template has no reasoning format,
so llama.cpp's parser leaves the tags in ``content`` (measured: ``reasoning_format``
deepseek or none per request, and a Qwen-style template with a forced ``<think>``, all
the same) and the tokenizer cuts ``<think>`` into pieces (``<``, ``think``, ``>``):
the raw-tag split, across chunks, on a real server. The split is held against the
server's own tokens: the same prompt answered whole at temperature 0 with ``logprobs``
lists the tokens it generated (the grammar makes it spell the tags a character or two
at a time: ``<``, ``t``, ``hi``, ``n``, ``k``, ``>``), and the reasoning chunks of the
stream must be exactly the tokens up to the one that closes ``</think>``.
"""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from loadtest.app.engines.llama import MODEL_ALIAS
from loadtest.datasets import build_pool
from loadtest.engine.runner import RunConfig, Runner
from tests.conftest import make_scenario, read_jsonl
from tests.llama_servers import require_llama_extra, wait_ready

require_llama_extra()

pytestmark = pytest.mark.timeout(300)

GRAMMAR = r"""root ::= "<think>" thought "</think>" answer
thought ::= [a-zA-Z ,]{20,120}
answer ::= [a-zA-Z ,.]{5,60}"""
PROMPTS = ["What colour is the sky? Think first.", "Name a fruit. Think first."]


async def _think_tokens(url: str, prompt: str) -> tuple[int, int, str]:
    """The prompt answered whole: tokens up to the one closing the think block, tokens
    in all, and the text (from the server's own list of generated tokens)."""
    body = {
        "model": MODEL_ALIAS,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 96,
        "temperature": 0.0,
        "grammar": GRAMMAR,
        "logprobs": True,
    }
    async with aiohttp.ClientSession() as s, s.post(url + "/v1/chat/completions", json=body) as r:
        data = await r.json()
    tokens = [t["token"] for t in data["choices"][0]["logprobs"]["content"]]
    text = ""
    for i, token in enumerate(tokens):
        text += token
        if "</think>" in text:
            return i + 1, len(tokens), "".join(tokens)
    raise AssertionError(f"no closing tag in {''.join(tokens)!r}")


async def test_a_think_block_in_content_is_split_as_the_server_tokenized_it(
    llama_baseline: str, tmp_path: Path
) -> None:
    await wait_ready(llama_baseline)
    sc = make_scenario(
        {"mode": "closed", "concurrency": 1, "requests": 4},
        sources=[{"kind": "inline", "category": "think", "prompts": PROMPTS}],
        max_tokens=96,
        sampling={"temperature": 0.0, "grammar": GRAMMAR},
    )
    pool, _ = build_pool(sc)
    config = RunConfig(scenario=sc, endpoint=llama_baseline, model=MODEL_ALIAS, run_dir=tmp_path)
    await Runner(config, pool).run()
    rows = read_jsonl(tmp_path / "requests.jsonl")
    assert [r["outcome"] for r in rows] == ["ok"] * 4, [r["error"] for r in rows]
    # The same prompts answered whole (temperature 0: the same tokens).
    blocks = {p: await _think_tokens(llama_baseline, p) for p in PROMPTS}
    for r in rows:
        assert r["reasoning_split"] == "think-tags", r
        think_tokens, total, text = blocks[PROMPTS[int(r["prompt_id"].rsplit("-", 1)[-1])]]
        assert text.startswith("<think>"), text
        # One token a chunk (no speculation): the chunks of the think block, tags and
        # all, are the server's tokens of it; the rest is the answer.
        assert r["output_tokens"] == total, (r, text)
        assert r["reasoning_chunks"] == think_tokens, (r, text)
        # The answer's tokens include the end token usage counts and no chunk carries.
        assert r["answer_tokens"] == total - think_tokens, (r, text)
        assert r["answer_chunks"] == total - think_tokens - 1, (r, text)
        assert r["answer_chunks"] >= 1
        # TTFA: the first answer token, after the reasoning's duration.
        assert r["ttfa_ms"] > r["ttft_ms"]
        assert r["ttfa_ms"] - r["ttft_ms"] == pytest.approx(r["reasoning_ms"], abs=0.01)
        # No reasoning field, no usage count: counted from the chunks.
        assert r["reasoning_tokens_reported"] is None
        assert r["reasoning_tokens"] == think_tokens
