"""How ``loadtest serve-llama`` and ``serve-vllm`` run their servers, each option with
its flag declared on it (``loadtest.flag``).

Light on purpose, as ``app.run_options`` is: the CLI builds both commands' flags from
these fields for every parse, and ``llama``/``vllm`` import the data cache and the model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadtest.app.engines.draft_model import DEFAULT_DRAFT_LAYERS
from loadtest.errors import UsageError
from loadtest.flag import check_bounds, flag

__all__ = [
    "DRAFT_MAX",
    "DRAFT_MIN",
    "DRAFT_P_MIN",
    "LLAMA_SPEC_MODES",
    "VLLM_SPEC_MODES",
    "LlamaOptions",
    "VllmOptions",
]

LLAMA_SPEC_MODES = ("none", "ngram", "draft", "self")
VLLM_SPEC_MODES = ("none", "ngram")
DRAFT_MAX, DRAFT_MIN, DRAFT_P_MIN = 3, 0, 0.0
"""llama.cpp's own defaults for draft-model speculation (its n_max, n_min, p_min)."""


@dataclass(frozen=True, slots=True)
class LlamaOptions:
    """How to run the llama.cpp server."""

    port: int = flag(8090, kind=int, help="listening port (default: 8090)")
    host: str = flag("127.0.0.1", help="listening address (default: 127.0.0.1)")
    spec: str = flag(
        "none",
        choices=LLAMA_SPEC_MODES,
        help="speculative decoding: n-gram, a draft model, or the target as its own draft",
    )
    parallel: int = flag(2, kind=int, minimum=1, help="slots (concurrent requests)")
    threads: int = flag(2, kind=int, minimum=1, help="CPU threads")
    ctx_per_slot: int = flag(4096, kind=int, minimum=1, help="context per slot")
    draft_max: int | None = flag(
        None,
        kind=int,
        minimum=1,
        help="most drafted tokens per step (default: 8 for n-gram, llama.cpp's 3 for a draft)",
    )
    """Most tokens drafted per step (None: 8 for n-gram, llama.cpp's default for a draft)."""
    draft_min: int = flag(
        DRAFT_MIN,
        kind=int,
        minimum=0,
        help="draft: fewest tokens worth a step (default: 0)",
    )
    """Fewest drafted tokens worth a verification step (draft model only)."""
    draft_p_min: float = flag(
        DRAFT_P_MIN,
        kind=float,
        minimum=0.0,
        maximum=1.0,
        help="draft: least confidence to go on (0.0)",
    )
    """The draft stops at a token it is less sure of than this (draft model only)."""
    draft_layers: int = flag(
        DEFAULT_DRAFT_LAYERS,
        kind=int,
        minimum=1,
        help="--spec draft: blocks the early exit keeps",
    )
    """``--spec draft``: blocks of the target the early-exit draft keeps."""
    draft: str | None = flag(None, help="--spec draft: a draft GGUF, or 'target' (self-draft)")
    """``--spec draft``: a draft GGUF to use instead, or ``target`` for the self-draft."""

    def check(self) -> None:
        """Raise ``UsageError`` naming the first bad option."""
        if self.spec not in LLAMA_SPEC_MODES:
            modes = ", ".join(LLAMA_SPEC_MODES)
            raise UsageError(f"--spec must be one of {modes}, not {self.spec!r}")
        check_bounds(self)
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


@dataclass(frozen=True, slots=True)
class VllmOptions:
    """How to run the vLLM server."""

    port: int = flag(8091, kind=int, help="listening port (default: 8091)")
    host: str = flag("127.0.0.1", help="listening address (default: 127.0.0.1)")
    spec: str = flag("none", choices=VLLM_SPEC_MODES, help="n-gram speculation, or none")
    num_speculative_tokens: int = flag(
        3, kind=int, minimum=1, help="n-gram: tokens proposed per step"
    )
    """n-gram: tokens proposed per step (the prompt's continuation after a match)."""
    max_model_len: int = flag(2048, kind=int, minimum=1, help="context per request")
    max_num_seqs: int = flag(8, kind=int, minimum=1, help="requests run at once")
    kv_cache_gb: float = flag(2.0, kind=float, positive=True, help="KV cache (GB, on the CPU)")
    threads_bind: str = flag(
        "auto",
        help="VLLM_CPU_OMP_THREADS_BIND: auto or a core range such as 0-1 (not all)",
    )
    """``VLLM_CPU_OMP_THREADS_BIND``: ``auto`` or a core range such as ``0-1`` (not ``all``,
    which crashes this build)."""

    def check(self) -> None:
        """Raise ``UsageError`` naming the first bad option."""
        if self.spec not in VLLM_SPEC_MODES:
            modes = ", ".join(VLLM_SPEC_MODES)
            raise UsageError(f"--spec must be one of {modes}, not {self.spec!r}")
        check_bounds(self)
        if self.threads_bind == "all":
            raise UsageError("--threads-bind all crashes vllm-cpu 0.32: use auto or 0-1")

    @property
    def mode(self) -> str:
        """What the server runs, in words."""
        if self.spec == "ngram":
            return f"n-gram speculation, {self.num_speculative_tokens} tokens"
        return "no speculation"
