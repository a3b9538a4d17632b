"""What the fit (``app/engines/twin.py``) reads off a run folder: its load and its requests."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.app.engines.twin_prefill import Window
from loadtest.errors import UsageError
from loadtest.model.io import load_summary, run_requests
from loadtest.model.summary import Summary

__all__ = ["RunPoint", "run_folders", "run_point"]


@dataclass(frozen=True, slots=True)
class RunPoint:
    """One run as the fit sees it: its load and its measured, successful requests."""

    folder: str
    in_flight: float
    """Requests in flight on average (Little's law: the sum of e2e over the window)."""
    prompt_tokens: tuple[int, ...]
    """Each prompt as the simulator counts it (characters / 4): the twin's prefill cost
    is per its own tokens, whatever the engine's tokenizer made of the prompt."""
    engine_tokens: int
    """All prompts' tokens as the engine counted them (``usage.prompt_tokens``)."""
    ttft_ms: tuple[float, ...]
    tpot_ms: tuple[float, ...]
    output_tokens: tuple[int, ...]
    stopped: int
    """Answers that ended before their ``max_tokens`` (``finish_reason`` stop)."""
    running_peak: float | None
    waiting_peak: float | None
    engine: str
    acceptance: float | None
    itl_p50_p90: tuple[float, float] | None = None
    """The run's inter-token gaps (all requests'), median and 90th percentile."""
    windows: tuple[Window, ...] = ()
    """Its requests' decode and prefill times, where the engine reported its prefill."""


def run_folders(given: list[str]) -> list[Path]:
    out: list[Path] = []
    for g in given:
        p = Path(g)
        if (p / "summary.json").is_file():
            out.append(p)
            continue
        steps = sorted(q for q in p.glob("*") if (q / "summary.json").is_file())
        if not steps and (p / "requests.jsonl").is_file():
            # A killed run's folder: the fit reads the run's own summary, not a rebuild.
            raise UsageError(
                f"--fit {g}: no summary.json (the run was killed before writing it); "
                f"loadtest summarize {g} rebuilds it"
            )
        if not steps:
            raise UsageError(
                f"--fit {g}: no summary.json in it or in a folder in it: neither a run "
                "folder nor a sweep folder of runs"
            )
        out += steps
    return out


def run_point(folder: Path) -> RunPoint:
    """What one run folder holds for the fit."""
    summary: Summary = load_summary(folder / "summary.json")
    rows = [
        r
        for r in run_requests(folder)
        if r.get("outcome") == "ok" and not r.get("warmup") and r.get("ttft_ms") is not None
    ]
    if not rows:
        raise UsageError(f"--fit {folder}: no measured request completed")
    load: Any = summary["run"].get("load") or {}
    if load.get("mode") == "closed" and load.get("concurrency"):
        in_flight = float(load["concurrency"])  # a closed loop keeps exactly this many
    else:
        # Little's law; the window's edges cut requests off, so it reads a little low.
        window_ms = 1000 * float(summary["run"].get("measured_s") or 0) or 1.0
        in_flight = sum(float(r.get("e2e_ms") or 0) for r in rows) / window_ms
    server: Any = summary.get("server") or {}
    itl: Any = summary.get("metrics", {}).get("itl_ms") or {}
    gaps = (float(itl["p50"]), float(itl["p90"])) if itl.get("p50") and itl.get("p90") else None
    tpot = tuple(float(r["tpot_ms"]) for r in rows if r.get("tpot_ms") is not None)
    if not tpot:
        # One-token answers (or tool calls read whole) hold no step time: the fit's
        # step line and spreads have nothing to stand on, so refuse rather than guess.
        raise UsageError(
            f"--fit {folder}: no request streamed two tokens or more (no TPOT), so the "
            "engine's step time cannot be fitted; fit runs whose answers are longer "
            "(max_tokens of 2 or more)"
        )
    return RunPoint(
        folder=str(folder),
        in_flight=max(1.0, in_flight),
        prompt_tokens=tuple(_sim_tokens(r) for r in rows),
        engine_tokens=sum(int(r.get("prompt_tokens") or 0) for r in rows),
        ttft_ms=tuple(float(r["ttft_ms"]) for r in rows),
        tpot_ms=tpot,
        output_tokens=tuple(int(r.get("output_tokens") or 0) for r in rows),
        stopped=sum(1 for r in rows if r.get("finish_reason") == "stop"),
        running_peak=server.get("running_peak"),
        waiting_peak=server.get("waiting_peak"),
        engine=str(server.get("engine") or "unknown"),
        acceptance=server.get("acceptance_rate"),
        itl_p50_p90=gaps,
        windows=tuple(w for r in rows if (w := _window(r)) is not None),
    )


def _sim_tokens(row: Any) -> int:
    """A prompt's tokens as the simulator counts them: four characters a token, a
    shorter last run one more (the engine's count where the record has no characters)."""
    chars = row.get("prompt_chars")
    if isinstance(chars, int) and chars > 0:
        return -(-chars // 4)
    return int(row.get("prompt_tokens") or 0)


def _window(row: Any) -> Window | None:
    """A request's decode and prefill times, where the engine reported its prefill."""
    timings = row.get("server_timings") or {}
    prompt_ms, first, end = timings.get("prompt_ms"), row.get("first_token_ms"), row.get("end_ms")
    if not isinstance(prompt_ms, int | float) or first is None or end is None:
        return None
    gaps = max(1, int(row.get("output_tokens") or 0) - 1)
    sent = float(row.get("sent_ms") or 0.0)
    chunks = tuple(sent + float(c) for c in row.get("token_chunk_ms") or ())
    return Window(float(first), float(end), float(prompt_ms), gaps, _sim_tokens(row), chunks)
