"""The two sides of ``loadtest ab``: a URL, the simulator, or a deployment ab owns.

A side given as ``llama:none``, ``llama:ngram``, ``llama:self``, ``llama:draft`` or
``llama:draft:LAYERS`` (llama.cpp, ``serve-llama``), or as ``vllm:none``, ``vllm:ngram``
or ``vllm:ngram:K`` (real vLLM, ``serve-vllm``, K tokens proposed per step) is started by
ab for each of its runs on a free loopback port, so that what a URL cannot show is
measured on the server process: the cold start (to ``/health``, then to a first streamed
token), its resident memory sampled through the run (steady = median, and the peak), and
the machine's energy over the run where counters are readable. The server is stopped after
each run, so every run starts alike (a cold engine, an empty prompt cache) whichever side
ran before it.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson
import psutil

from loadtest.app.deployment import free_port
from loadtest.app.llama import (
    MODEL_ALIAS,
    SPEC_MODES,
    LlamaOptions,
    draft_path,
    ensure_model,
    llama_command,
)
from loadtest.app.options import RunOptions
from loadtest.app.vllm import SERVED_NAME as VLLM_NAME
from loadtest.app.vllm import SPEC_MODES as VLLM_MODES
from loadtest.app.vllm import VllmOptions, ensure_folder, vllm_command
from loadtest.errors import UsageError
from loadtest.features.deployment_cost import EnergyMeter, RssSampler, measure_cold_start
from loadtest.model.atomic import write_atomic
from loadtest.model.comparison import DeploymentRun
from loadtest.model.summary import Summary

__all__ = [
    "MANAGED_PREFIX",
    "VLLM_PREFIX",
    "RunFn",
    "Side",
    "parse_side",
    "run_side",
    "stop_process",
]

MANAGED_PREFIX = "llama:"
VLLM_PREFIX = "vllm:"
MIB = 1024 * 1024

RunFn = Callable[[RunOptions], tuple[Summary, Path, bool]]


@dataclass(frozen=True, slots=True)
class Side:
    """One side as given: a URL (None: the built-in simulator), or a managed deployment."""

    given: str | None
    llama: LlamaOptions | None = None
    vllm: VllmOptions | None = None

    @property
    def url(self) -> str | None:
        """The endpoint of an unmanaged side."""
        return None if self.llama or self.vllm else self.given


def _mode(
    text: str, flag: str, prefix: str, modes: tuple[str, ...], numbered: str, what: str
) -> tuple[str, int | None]:
    """``prefix``MODE or ``prefix``NUMBERED:N: the mode and N (None when not given)."""
    parts = text[len(prefix) :].split(":")
    spec = parts[0]
    if spec not in modes or len(parts) > 2 or (len(parts) == 2 and spec != numbered):
        raise UsageError(
            f"{flag} {text!r}: a managed side is {prefix}{'|'.join(modes)} "
            f"or {prefix}{numbered}:{what}"
        )
    if len(parts) == 1:
        return spec, None
    try:
        return spec, int(parts[1])
    except ValueError:
        raise UsageError(f"{flag} {text!r}: {what.split()[0]} must be a whole number") from None


def parse_side(text: str | None, flag: str) -> Side:
    """``--baseline``/``--candidate``: a URL, ``llama:MODE[:LAYERS]`` or ``vllm:MODE[:K]``."""
    if text is not None and text.startswith(VLLM_PREFIX):
        spec, k = _mode(text, flag, VLLM_PREFIX, VLLM_MODES, "ngram", "K (tokens per step)")
        vopts = VllmOptions(spec=spec)
        if k is not None:
            vopts = dataclasses.replace(vopts, num_speculative_tokens=k)
        vopts.check()
        return Side(text, vllm=vopts)
    if text is None or not text.startswith(MANAGED_PREFIX):
        return Side(text)
    what = "LAYERS (blocks the early-exit draft keeps)"
    spec, layers = _mode(text, flag, MANAGED_PREFIX, SPEC_MODES, "draft", what)
    opts = LlamaOptions(spec=spec)
    if layers is not None:
        opts = dataclasses.replace(opts, draft_layers=layers)
    opts.check()
    return Side(text, opts)


def stop_process(proc: subprocess.Popen[bytes], grace_s: float = 15.0) -> None:
    """Terminate ``proc``; kill it if it has not exited ``grace_s`` later, and then any of
    its children still alive (vLLM's engine processes must not outlive a run)."""
    try:
        children = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        children = []
    proc.terminate()
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for child in children:
        with contextlib.suppress(psutil.Error):
            child.kill()


def run_side(side: Side, options: RunOptions, run: RunFn) -> tuple[Path, bool]:
    """One run of a side; a managed one is started, measured and stopped around it.

    Returns the run folder and whether the run was stopped; a managed run's costs are
    written to ``deployment.json`` in its folder (``compare.load_run`` reads them).
    """
    if side.vllm is not None:
        vopts = dataclasses.replace(side.vllm, port=free_port())
        # Convert the model (once, cached) before the clock starts: it is not a cold start.
        ensure_folder()
        cmd, url, name, grace = (
            vllm_command(vopts),
            f"http://{vopts.host}:{vopts.port}",
            VLLM_NAME,
            60.0,
        )
    elif side.llama is not None:
        opts = dataclasses.replace(side.llama, port=free_port())
        # Build the draft file (once, cached) before the clock starts: not a cold start.
        draft_path(opts, ensure_model())
        cmd, url, name, grace = (
            llama_command(opts),
            f"http://{opts.host}:{opts.port}",
            MODEL_ALIAS,
            15.0,
        )
    else:
        _, run_dir, stopped = run(dataclasses.replace(options, endpoint=side.url))
        return run_dir, stopped
    cold, proc = asyncio.run(measure_cold_start(cmd, url, name, timeout_s=600.0))
    try:
        rss = RssSampler(proc.pid).start()
        energy = EnergyMeter().start()
        measured = dataclasses.replace(options, endpoint=url, model=options.model or name)
        _, run_dir, stopped = run(measured)
        used, memory = energy.stop(), rss.stop()
    finally:
        stop_process(proc, grace)
    record: DeploymentRun = {
        "deployment": str(side.given),
        "ready_s": round(cold.ready_s, 3),
        "first_token_s": None if cold.first_token_s is None else round(cold.first_token_s, 3),
        "first_token_error": cold.first_token_error,
        "rss_steady_mib": round(memory.steady_bytes / MIB, 1),
        "rss_peak_mib": round(memory.peak_bytes / MIB, 1),
        "rss_samples": memory.samples,
        "energy_j": None if used.joules is None else round(used.joules, 3),
        "energy_source": used.source,
        "energy_reason": used.reason,
        "measured_s": round(used.seconds, 3),
    }
    write_atomic(run_dir / "deployment.json", orjson.dumps(record, option=orjson.OPT_INDENT_2))
    return run_dir, stopped
