"""``ab --server-sweep NAME=V,V,...``: a server setting as a dimension of the decision.

For each value, every side ``ab`` starts (``llama:``, ``vllm:``, ``sim:``) is started with
the setting at that value, and a whole ``ab --sweep`` or ``ab --search`` runs on them
into ``OUT/<time>-server-sweep-<name>/<setting>=<value>/``: one decision per value, so
a user sees how the load where speculation stops paying moves with, say, llama.cpp's
slots or vLLM's batch size. Every run of a managed side already starts a fresh server
(a cold engine, an empty prompt cache): nothing is carried from one setting, or one
run, to the next. ``server-sweep.json`` beside the values holds, per value, each
category's answer and what the setting cost: the sides' cold starts and memory, from
each run's ``deployment.json``.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import orjson

from loadtest.app.ab.side_types import SIDE_TYPES, setting_of
from loadtest.app.ab.sides import Side
from loadtest.errors import UsageError
from loadtest.model.atomic import write_atomic
from loadtest.model.decision import Decision
from loadtest.model.server_sweep import ServerSetting, ServerSide, ServerSweepResult
from loadtest.report.compare import load_runs

__all__ = [
    "ServerSweep",
    "parse_sampling_sweep",
    "parse_server_sweep",
    "render_server_sweep",
    "run_server_sweep",
    "with_setting",
]

RESULT = "server-sweep.json"


@dataclass(frozen=True, slots=True)
class ServerSweep:
    """``--server-sweep NAME=V,V,...`` (a server setting) or ``--sampling-sweep`` (a
    request field, ``request``): one setting, its values in the order given."""

    name: str
    values: tuple[float | str | bool, ...]
    request: bool = False
    """A field of every request (``reasoning_effort``), not a setting of the servers."""

    def label(self, value: float | str | bool) -> str:
        said = f"{value:g}" if isinstance(value, float) else str(value).lower()
        return f"{self.name}={said}"


def parse_server_sweep(text: str) -> ServerSweep:
    """``parallel=1,2,4``; ``UsageError`` naming ``--server-sweep``."""
    name, eq, values = text.partition("=")
    name = name.strip().replace("-", "_")
    try:
        parsed = tuple(float(v) for v in values.split(",") if v.strip())
    except ValueError:
        parsed = ()
    if not eq or not name or not parsed or len(set(parsed)) != len(parsed):
        raise UsageError(
            f"--server-sweep {text!r}: expected SETTING=V,V,... with distinct numbers "
            "(e.g. parallel=1,2,4 or max_num_seqs=4,8,16)"
        )
    return ServerSweep(name, parsed)


def parse_sampling_sweep(text: str) -> ServerSweep:
    """``reasoning_effort=low,medium,high``: a request field and its values (numbers,
    ``true``/``false`` or words); ``UsageError`` naming ``--sampling-sweep``."""
    from loadtest.config.scenario import RESERVED_SAMPLING

    name, eq, values = text.partition("=")
    name = name.strip()
    words = [v.strip() for v in values.split(",") if v.strip()]
    if not eq or not name or not words or len(set(words)) != len(words):
        raise UsageError(
            f"--sampling-sweep {text!r}: expected FIELD=V,V,... with distinct values "
            "(e.g. reasoning_effort=low,medium,high)"
        )
    if name in RESERVED_SAMPLING:
        raise UsageError(f"--sampling-sweep {name}: set by loadtest; use its own flag")
    return ServerSweep(name, tuple(_scalar(w) for w in words), request=True)


def _scalar(word: str) -> float | str | bool:
    if word in ("true", "false"):
        return word == "true"
    try:
        return float(word)
    except ValueError:
        return word


def with_setting(side: Side, sweep: ServerSweep, value: float | str | bool) -> Side:
    """``side`` started with the setting at ``value``; ``UsageError`` when ``side`` is not
    one ab starts, or its engine has no such setting. A request field leaves it as is."""
    name = sweep.name
    if sweep.request:
        return side
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"--server-sweep {sweep.label(value)}: a number")
    value = float(value)
    if side.kind is not None:
        try:
            made = setting_of(SIDE_TYPES.load(side.kind), side.settings, name, value)
        except UsageError as exc:
            raise UsageError(f"--server-sweep {sweep.label(value)}: {exc}") from None
        return dataclasses.replace(side, settings=made)
    raise UsageError(
        f"--server-sweep: {side.given or 'the built-in simulator'!r} is not a deployment ab "
        "starts (NAME:MODE of a side type): its server's settings are not loadtest's"
    )


def _costs(decision: Decision, sides: dict[str, Side]) -> list[ServerSide]:
    """What each side's runs under this setting cost, from their ``deployment.json``."""
    out: list[ServerSide] = []
    for side, given in sides.items():
        folders = [Path(s["folder"]) / side for s in decision["steps"]]
        runs = [r for f in folders if f.is_dir() for r in load_runs(f)]
        costs = [r.deployment for r in runs if r.deployment is not None]
        ready = [c["ready_s"] for c in costs]
        first = [c["first_token_s"] for c in costs if c["first_token_s"] is not None]
        out.append(
            {
                "side": given.given or side,
                "runs": len(runs),
                "ready_s": round(statistics.median(ready), 3) if ready else None,
                "first_token_s": round(statistics.median(first), 3) if first else None,
                "rss_peak_mib": max((c["rss_peak_mib"] for c in costs), default=None),
            }
        )
    return out


def _answers(decision: Decision) -> list[str]:
    search = decision.get("search")
    if search is not None:
        return [f"{c['category']}: {c['text']}" for c in search["crossovers"]]
    return [f"{row['category']}: {row['bracket']['text']}" for row in decision["rows"]]


DecideAt = Callable[
    [float | str | bool, dict[str, Side], str, tuple[tuple[str, str], ...]],
    tuple[Decision, bool],
]
"""Run the whole ab sweep or search at this value, on these sides, into this ``--out``,
with these live labels: (its decision, whether Ctrl-C stopped it)."""


def _kind(request: bool) -> str:
    return "request field" if request else "server setting"


def run_server_sweep(
    sweep: ServerSweep,
    sides: dict[str, Side],
    out: Path,
    name: str,
    decide_at: DecideAt,
    labels: tuple[tuple[str, str], ...] = (),
    say: Callable[[str], None] = print,
) -> tuple[ServerSweepResult, Path, bool]:
    """Every value's sweep or search; returns (server-sweep.json's content, folder,
    stopped). The sides are checked for every value before anything runs."""
    made = {v: {k: with_setting(s, sweep, v) for k, s in sides.items()} for v in sweep.values}
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime())
    folder = out / f"{stamp}-server-sweep-{name}"
    result: ServerSweepResult = {
        "setting": sweep.name,
        "request": sweep.request,
        "values": [],
        "interrupted": False,
    }
    stopped = False
    for value, at in made.items():
        say(f"{_kind(sweep.request)} {sweep.label(value)}")
        where = folder / sweep.label(value)
        label = ("sampling" if sweep.request else "server", sweep.label(value))
        decision, stopped = decide_at(value, at, str(where), (*labels, label))
        setting: ServerSetting = {
            "value": value,
            "folder": str(where),
            "answers": _answers(decision),
            "sides": _costs(decision, at),
        }
        result["values"].append(setting)
        result["interrupted"] = stopped
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(folder / RESULT, orjson.dumps(result, option=orjson.OPT_INDENT_2))
        if stopped:
            break
    return result, folder, stopped


def render_server_sweep(result: ServerSweepResult) -> str:
    """Per value: each category's answer, and what the sides cost to start and hold."""
    name = result["setting"]
    lines = [f"{_kind(result['request'])} {name}: where the candidate stops paying"]
    for s in result["values"]:
        value = s["value"]
        said = f"{value:g}" if isinstance(value, float) else str(value).lower()
        lines.append(f"  {name}={said}:")
        lines += [f"    {a}" for a in s["answers"]]
        for side in s["sides"]:
            ready = "-" if side["ready_s"] is None else f"{side['ready_s']:.2f} s"
            peak = "-" if side["rss_peak_mib"] is None else f"{side['rss_peak_mib']:.0f} MiB"
            lines.append(
                f"    {side['side']}: {side['runs']} runs, cold start to ready {ready} "
                f"(median), peak memory {peak}"
            )
    return "\n".join(lines)
