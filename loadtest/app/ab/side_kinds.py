"""loadtest's own ``ab`` side types, registered as a third party's are (``loadtest.sides``).

``llama:none|ngram|self|draft[:LAYERS]``: llama.cpp as ``serve-llama`` starts it (the
model, and an early-exit draft, built once before the clock); ``vllm:none|ngram[:K]``:
real vLLM as ``serve-vllm`` starts it, K tokens proposed per step (the model converted
once before the clock).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from loadtest.app.ab.side_types import Launch, SideTypeBase, whole
from loadtest.app.engines.llama import (
    MODEL_ALIAS,
    SPEC_MODES,
    LlamaOptions,
    draft_path,
    ensure_model,
    llama_command,
)
from loadtest.app.engines.vllm import SERVED_NAME, VllmOptions, ensure_folder, vllm_command
from loadtest.app.engines.vllm import SPEC_MODES as VLLM_MODES
from loadtest.errors import UsageError

__all__ = ["LLAMA", "VLLM"]


def _mode(
    given: str, mode: str, modes: tuple[str, ...], numbered: str, what: str
) -> tuple[str, int | None]:
    """MODE or NUMBERED:N: the mode and N (None when not given)."""
    prefix = given[: len(given) - len(mode)]
    parts = mode.split(":")
    spec = parts[0]
    if spec not in modes or len(parts) > 2 or (len(parts) == 2 and spec != numbered):
        raise UsageError(
            f"{given!r}: a managed side is {prefix}{'|'.join(modes)} or {prefix}{numbered}:{what}"
        )
    if len(parts) == 1:
        return spec, None
    try:
        return spec, int(parts[1])
    except ValueError:
        raise UsageError(f"{given!r}: {what.split()[0]} must be a whole number") from None


class _Llama(SideTypeBase):
    """``llama:``: llama.cpp, stopped and started again for every run."""

    start_cost = "llama.cpp's cold start"
    draft_setting = "llama.cpp speculative.draft.n_max (most tokens drafted per step)"
    server_settings = ("parallel", "threads", "ctx_per_slot")
    """The draft length has ``--draft-max``."""

    def parse(self, mode: str, given: str) -> LlamaOptions:
        what = "LAYERS (blocks the early-exit draft keeps)"
        spec, layers = _mode(given, mode, SPEC_MODES, "draft", what)
        opts = LlamaOptions(spec=spec)
        if layers is not None:
            opts = dataclasses.replace(opts, draft_layers=layers)
        opts.check()
        return opts

    def launch(self, settings: LlamaOptions, host: str, port: int) -> Launch:
        opts = dataclasses.replace(settings, host=host, port=port)
        draft_path(opts, ensure_model())  # built once, cached: not a cold start
        return Launch(tuple(llama_command(opts)), MODEL_ALIAS, 15.0)

    def speculates(self, settings: LlamaOptions) -> bool:
        return settings.spec != "none"

    def with_draft_max(self, settings: LlamaOptions, k: int) -> LlamaOptions | None:
        return dataclasses.replace(settings, draft_max=k) if self.speculates(settings) else None

    def with_setting(self, settings: LlamaOptions, name: str, value: float) -> LlamaOptions:
        if name not in self.server_settings:
            raise UsageError(f"llama.cpp sides take {', '.join(self.server_settings)}")
        count: Any = whole(value)  # a field named at run time: checked just below
        made = dataclasses.replace(settings, **{name: count})
        made.check()
        return made


class _Vllm(SideTypeBase):
    """``vllm:``: real vLLM, stopped and started again for every run."""

    start_cost = "vLLM's start (a minute or more on the CPU)"
    server_settings = ("max_num_seqs", "max_model_len", "num_speculative_tokens", "kv_cache_gb")

    def parse(self, mode: str, given: str) -> VllmOptions:
        spec, k = _mode(given, mode, VLLM_MODES, "ngram", "K (tokens per step)")
        opts = VllmOptions(spec=spec)
        if k is not None:
            opts = dataclasses.replace(opts, num_speculative_tokens=k)
        opts.check()
        return opts

    def launch(self, settings: VllmOptions, host: str, port: int) -> Launch:
        ensure_folder()  # the model converted once, cached: not a cold start
        opts = dataclasses.replace(settings, host=host, port=port)
        return Launch(tuple(vllm_command(opts)), SERVED_NAME, 60.0)

    def speculates(self, settings: VllmOptions) -> bool:
        return settings.spec != "none"

    def with_setting(self, settings: VllmOptions, name: str, value: float) -> VllmOptions:
        if name not in self.server_settings:
            raise UsageError(f"vLLM sides take {', '.join(self.server_settings)}")
        number: Any = value if name == "kv_cache_gb" else whole(value)
        made = dataclasses.replace(settings, **{name: number})
        made.check()
        return made


LLAMA = _Llama()
VLLM = _Vllm()
