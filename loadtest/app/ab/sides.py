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

``sim:none`` and ``sim:spec`` are the built-in simulator as the scenario's ``[sim]``
table sets it up, without or with speculation: a side type too (``side_kinds.SIM``), whose
server each run starts itself, as the simulator always is (its memory is not measured:
"cannot tell" for a budget).

``--draft-max 1,2,4`` (``draft_sides``) turns a speculative managed candidate into one
candidate per draft length, ``candidate-k1``, ``candidate-k2``, ...: llama.cpp's
``speculative.draft.n_max``, or the simulator's ``spec_k``.
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

from loadtest.app.ab.side_types import SIDE_TYPES, draft_max_of, in_run_of, speculates_of
from loadtest.app.deployment import free_port
from loadtest.app.engines.llama import LlamaOptions
from loadtest.app.engines.vllm import VllmOptions
from loadtest.app.options import RunOptions
from loadtest.errors import UsageError
from loadtest.features.deployment_cost import EnergyMeter, RssSampler, measure_cold_start
from loadtest.model.atomic import write_atomic
from loadtest.model.comparison import DeploymentRun
from loadtest.model.summary import Summary

__all__ = [
    "RunFn",
    "Side",
    "draft_sides",
    "parse_draft_values",
    "parse_side",
    "run_side",
    "stop_process",
]

MIB = 1024 * 1024

RunFn = Callable[[RunOptions], tuple[Summary, Path, bool]]


@dataclass(frozen=True, slots=True)
class Side:
    """One side as given: a URL (None: the built-in simulator), or a deployment of a side
    type (``kind``: ``sim``, ``llama``, ``vllm`` or a plugin's)."""

    given: str | None
    kind: str | None = None
    """The side type's name (``app.ab.side_types``); None: a URL or the simulator."""
    settings: object = None
    """What the side type read from its MODE (``LlamaOptions`` for ``llama:``...)."""
    draft_max: int | None = None
    """The draft length this side was given by ``--draft-max`` (None: its default)."""

    @property
    def url(self) -> str | None:
        """The endpoint of an unmanaged side."""
        return None if self.managed else self.given

    @property
    def managed(self) -> bool:
        """A side loadtest starts for each of its runs (a side type's)."""
        return self.kind is not None

    @property
    def drafts(self) -> bool | None:
        """Whether this side speculates, as given (``llama:none``: no); None: a URL, or a
        side type that does not say (``SideTypeBase.speculates``)."""
        return speculates_of(SIDE_TYPES.load(self.kind), self.settings) if self.kind else None

    def served_in_run(self, options: RunOptions) -> RunOptions | None:
        """The options of a run whose own process serves this side (``sim:``); None: a
        URL, or a side whose server is launched around the run."""
        if self.kind is None:
            return None
        return in_run_of(SIDE_TYPES.load(self.kind), self.settings, options)

    @property
    def llama(self) -> LlamaOptions | None:
        """A ``llama:`` side's options."""
        return self.settings if isinstance(self.settings, LlamaOptions) else None

    @property
    def vllm(self) -> VllmOptions | None:
        """A ``vllm:`` side's options."""
        return self.settings if isinstance(self.settings, VllmOptions) else None


def parse_side(text: str | None, flag: str) -> Side:
    """``--baseline``/``--candidate``: a URL, or ``NAME:MODE`` of an ab side type
    (``sim:none|spec``, ``llama:MODE[:LAYERS]``, ``vllm:MODE[:K]``, a plugin's)."""
    name, colon, mode = (text or "").partition(":")
    if not colon or name in ("http", "https"):
        return Side(text)  # a URL (checked as any endpoint), or None: the simulator
    if name not in SIDE_TYPES:
        off = SIDE_TYPES.turned_off(name)
        raise UsageError(
            f"{flag} {text!r}: {off}"
            if off
            else f"{flag} {text!r}: give a URL "
            f"(http://HOST:PORT), or NAME:MODE of an ab side type "
            f"(known: {', '.join(SIDE_TYPES.names()) or 'none'})"
        )
    try:
        return Side(text, name, SIDE_TYPES.load(name).parse(mode, str(text)))
    except UsageError as exc:
        raise UsageError(f"{flag} {exc}") from None


def parse_draft_values(text: str) -> tuple[int, ...]:
    """``--draft-max 1,2,4``: distinct whole numbers of at least 1, in increasing order."""
    try:
        values = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError:
        values = []
    if not values or values[0] < 1:
        raise UsageError(f"--draft-max {text!r}: expected draft lengths like 1,2,4 (each >= 1)")
    return tuple(values)


def draft_sides(side: Side, values: tuple[int, ...]) -> dict[str, Side]:
    """One candidate per draft length: ``candidate-k1``, ... (``--draft-max 1,4``).

    Only a side loadtest starts can be given a draft length: a URL's server was started
    by someone else, and a side without speculation has no draft."""
    drafted = (
        {k: draft_max_of(SIDE_TYPES.load(side.kind), side.settings, k) for k in values}
        if side.kind is not None
        else {}
    )
    if drafted and all(s is not None for s in drafted.values()):
        made = {k: dataclasses.replace(side, settings=s) for k, s in drafted.items()}
    else:
        raise UsageError(
            f"--draft-max: the candidate {side.given or 'the built-in simulator'!r} is not a "
            "speculative deployment ab starts with a draft length (llama:ngram|draft|self, "
            "sim:spec, or a plugin side type with a draft length)"
        )
    return {
        f"candidate-k{k}": dataclasses.replace(s, given=f"{side.given} K={k}", draft_max=k)
        for k, s in made.items()
    }


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
    if side.kind is None:
        _, run_dir, stopped = run(dataclasses.replace(options, endpoint=side.url))
        return run_dir, stopped
    in_run = side.served_in_run(options)
    if in_run is not None:  # the run's own process serves it: nothing to launch
        _, run_dir, stopped = run(in_run)
        return run_dir, stopped
    host = "127.0.0.1"
    port = free_port(host)
    launch = SIDE_TYPES.load(side.kind).launch(side.settings, host, port)
    cmd, url, name, grace = (
        list(launch.command),
        f"http://{host}:{port}",
        launch.model,
        launch.stop_grace_s,
    )
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
        "drafts": side.drafts,
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
