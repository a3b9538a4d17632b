"""The two sides of ``loadtest ab``: a URL, the simulator, or a llama.cpp deployment ab owns.

A side given as ``llama:none``, ``llama:ngram``, ``llama:self``, ``llama:draft`` or
``llama:draft:LAYERS`` is started by ab for each of its runs (``serve-llama`` on a free
loopback port), so that what a URL cannot show is measured on the server process: the
cold start (to ``/health``, then to a first streamed token), its resident memory
sampled through the run (steady = median, and the peak), and the machine's energy over
the run where counters are readable. The server is stopped after each run, so every run
starts alike (a cold engine, an empty prompt cache) whichever side ran before it.

``sim:none`` and ``sim:spec`` are the built-in simulator as the scenario's ``[sim]``
table sets it up, without or with speculation (``[sim] speculative``), started by each
run as the simulator always is: two sides of one simulated machine, so that a designed
load model can be swept (its memory is not measured: "cannot tell" for a budget).

``--draft-max 1,2,4`` (``draft_sides``) turns a speculative managed candidate into one
candidate per draft length, ``candidate-k1``, ``candidate-k2``, ...: llama.cpp's
``speculative.draft.n_max``, or the simulator's ``spec_k``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

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
from loadtest.errors import UsageError
from loadtest.features.deployment_cost import EnergyMeter, RssSampler, measure_cold_start
from loadtest.model.comparison import DeploymentRun
from loadtest.model.summary import Summary
from loadtest.report.atomic import write_atomic

__all__ = [
    "MANAGED_PREFIX",
    "SIM_PREFIX",
    "RunFn",
    "Side",
    "draft_sides",
    "parse_draft_values",
    "parse_side",
    "run_side",
    "stop_process",
]

MANAGED_PREFIX = "llama:"
SIM_PREFIX = "sim:"
SIM_MODES = ("none", "spec")
MIB = 1024 * 1024

RunFn = Callable[[RunOptions], tuple[Summary, Path, bool]]


@dataclass(frozen=True, slots=True)
class Side:
    """One side as given: a URL (None: the built-in simulator), or a managed deployment."""

    given: str | None
    llama: LlamaOptions | None = None
    sim_speculative: bool | None = None
    """``sim:none`` (False) or ``sim:spec`` (True); None: not a ``sim:`` side."""
    sim_spec_k: int | None = None
    """``sim:spec`` with ``--draft-max``: the simulator's draft length for this side."""
    draft_max: int | None = None
    """The draft length this side was given by ``--draft-max`` (None: its default)."""

    @property
    def url(self) -> str | None:
        """The endpoint of an unmanaged side."""
        return None if self.llama or self.sim_speculative is not None else self.given

    @property
    def managed(self) -> bool:
        """A side loadtest starts for each of its runs (llama.cpp or ``sim:``)."""
        return self.llama is not None or self.sim_speculative is not None


def parse_side(text: str | None, flag: str) -> Side:
    """``--baseline``/``--candidate``: a URL, ``llama:MODE[:LAYERS]`` or ``sim:none|spec``."""
    if text is not None and text.startswith(SIM_PREFIX):
        mode = text[len(SIM_PREFIX) :]
        if mode not in SIM_MODES:
            raise UsageError(f"{flag} {text!r}: a simulator side is sim:none or sim:spec")
        return Side(text, sim_speculative=mode == "spec")
    if text is None or not text.startswith(MANAGED_PREFIX):
        return Side(text)
    parts = text[len(MANAGED_PREFIX) :].split(":")
    spec = parts[0]
    if spec not in SPEC_MODES or len(parts) > 2 or (len(parts) == 2 and spec != "draft"):
        raise UsageError(
            f"{flag} {text!r}: a managed side is llama:{'|'.join(SPEC_MODES)} "
            "or llama:draft:LAYERS (blocks the early-exit draft keeps)"
        )
    opts = LlamaOptions(spec=spec)
    if len(parts) == 2:
        try:
            opts = dataclasses.replace(opts, draft_layers=int(parts[1]))
        except ValueError:
            raise UsageError(f"{flag} {text!r}: LAYERS must be a whole number") from None
    opts.check()
    return Side(text, opts)


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
    if side.llama is not None and side.llama.spec != "none":
        made = {
            k: dataclasses.replace(side, llama=dataclasses.replace(side.llama, draft_max=k))
            for k in values
        }
    elif side.sim_speculative:
        made = {k: dataclasses.replace(side, sim_spec_k=k) for k in values}
    else:
        raise UsageError(
            f"--draft-max: the candidate {side.given or 'the built-in simulator'!r} is not a "
            "speculative deployment ab starts (llama:ngram|draft|self or sim:spec)"
        )
    return {
        f"candidate-k{k}": dataclasses.replace(s, given=f"{side.given} K={k}", draft_max=k)
        for k, s in made.items()
    }


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """Terminate ``proc``; kill it if it has not exited 15 s later."""
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_side(side: Side, options: RunOptions, run: RunFn) -> tuple[Path, bool]:
    """One run of a side; a managed one is started, measured and stopped around it.

    Returns the run folder and whether the run was stopped; a managed run's costs are
    written to ``deployment.json`` in its folder (``compare.load_run`` reads them).
    """
    if side.sim_speculative is not None:
        sim = dataclasses.replace(
            options, endpoint=None, sim_speculative=side.sim_speculative, sim_spec_k=side.sim_spec_k
        )
        _, run_dir, stopped = run(sim)
        return run_dir, stopped
    if side.llama is None:
        _, run_dir, stopped = run(dataclasses.replace(options, endpoint=side.url))
        return run_dir, stopped
    opts = dataclasses.replace(side.llama, port=free_port())
    # Build the draft file (once, cached) before the clock starts: it is not a cold start.
    draft_path(opts, ensure_model())
    url = f"http://{opts.host}:{opts.port}"
    cold, proc = asyncio.run(measure_cold_start(llama_command(opts), url, MODEL_ALIAS))
    try:
        rss = RssSampler(proc.pid).start()
        energy = EnergyMeter().start()
        measured = dataclasses.replace(options, endpoint=url, model=options.model or MODEL_ALIAS)
        _, run_dir, stopped = run(measured)
        used, memory = energy.stop(), rss.stop()
    finally:
        stop_process(proc)
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
