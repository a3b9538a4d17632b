"""loadtest's own ``ab`` side types, registered as a third party's are (``loadtest.sides``).

``llama:none|ngram|self|draft[:LAYERS]``: llama.cpp as ``serve-llama`` starts it (the
model, and an early-exit draft, built once before the clock); ``vllm:none|ngram[:K]``:
real vLLM as ``serve-vllm`` starts it, K tokens proposed per step (the model converted
once before the clock); ``sim:none|spec``: the built-in simulator as the scenario's
``[sim]`` table sets it up, without or with speculation, started by each run as the
simulator always is (so nothing is launched around the run, and no start is measured).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
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
from loadtest.app.run_options import RunOptions
from loadtest.errors import UsageError

__all__ = ["LLAMA", "SIM", "VLLM", "SimSettings"]


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


@dataclass(frozen=True, slots=True)
class SimSettings:
    """A ``sim:`` side: the built-in simulator over the scenario's ``[sim]`` table."""

    speculative: bool
    spec_k: int | None = None
    """The draft length ``--draft-max`` gave it (None: ``[sim]``'s)."""
    settings: tuple[tuple[str, float | int], ...] = ()
    """Settings over ``[sim]``'s (``--server-sweep``), in the order given."""


class _Sim(SideTypeBase):
    """``sim:none|spec``: the simulator each run starts, without or with speculation."""

    start_cost = "the simulator's start"
    draft_setting = "simulator spec_k (tokens the draft proposes per step)"

    # A property where the base has a plain tuple: read alike, made only when asked.
    @property
    def server_settings(self) -> tuple[str, ...]:  # type: ignore[override]
        """The simulator's numeric settings (imported when asked: a ``llama:`` side
        does not load the simulator)."""
        from loadtest.sim.model import SimConfig

        defaults = SimConfig()
        return tuple(
            f.name
            for f in dataclasses.fields(SimConfig)
            if isinstance(getattr(defaults, f.name), int | float)
            and not isinstance(getattr(defaults, f.name), bool)
        )

    def parse(self, mode: str, given: str) -> SimSettings:
        if mode not in ("none", "spec"):
            raise UsageError(f"{given!r}: a simulator side is sim:none or sim:spec")
        return SimSettings(speculative=mode == "spec")

    def launch(self, settings: SimSettings, host: str, port: int) -> Launch:
        # Never called: ``in_run`` always answers. A ``sim:`` side is the run's own
        # simulator so that what only it can do (a draft server's faults) still runs.
        raise UsageError("a sim: side is served by each run's own simulator")

    def in_run(self, settings: SimSettings, options: RunOptions) -> RunOptions:
        drafted = () if settings.spec_k is None else (("spec_k", settings.spec_k),)
        return dataclasses.replace(
            options,
            endpoint=None,
            sim_speculative=settings.speculative,
            sim_settings=(*settings.settings, *drafted),  # the draft length wins, as given
        )

    def speculates(self, settings: SimSettings) -> bool:
        return settings.speculative

    def with_draft_max(self, settings: SimSettings, k: int) -> SimSettings | None:
        return dataclasses.replace(settings, spec_k=k) if settings.speculative else None

    def with_setting(self, settings: SimSettings, name: str, value: float) -> SimSettings:
        from loadtest.sim.model import SimConfig

        if name not in self.server_settings:
            raise UsageError("not a numeric simulator setting")
        setting: Any = value if isinstance(getattr(SimConfig(), name), float) else whole(value)
        dataclasses.replace(SimConfig(), **{name: setting}).check()
        return dataclasses.replace(settings, settings=(*settings.settings, (name, setting)))


LLAMA = _Llama()
VLLM = _Vllm()
SIM = _Sim()
