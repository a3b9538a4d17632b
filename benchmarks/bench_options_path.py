"""The path of a run's options through loadtest's modules (issue #44).

Method: one command (``run``, ``sweep`` or ``ab``; ARGV below) runs in this process on the
built-in simulator through ``loadtest.cli.main.main``, under ``sys.setprofile`` (and
``threading.setprofile`` for the threads it starts). On each 'call' event of a new frame
(a generator's or coroutine's resumptions are not new) in a module under ``loadtest.``,
the frame's named parameters (positional, keyword-only; not ``self``) are looked at: one that
holds a ``RunOptions``, or a ``Scenario`` (what the options are applied to, and every
replaced copy), found by type name, records the frame's module (``f_globals['__name__']``).
Each thread's records, consecutive repeats collapsed, are its path (the main thread's
first): ``modules`` counts the distinct ones, ``visits`` the entries, ``returns`` the
entries whose module came earlier in the path. The figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import dis
import faulthandler
import functools
import json
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

ARGV = {
    "run": "run --concurrency 4 --requests 20 --no-tui",
    "sweep": "sweep --concurrency 1,2 --requests 10 --no-tui",
    # The default scenario (mixed) has draft faults, which ab refuses on sim: sides.
    "ab": (
        "ab tool-calls --baseline sim:none --candidate sim:spec --repeat 1 --requests 10 --no-tui"
    ),
}
SETS = {"RunOptions": {"RunOptions"}, "RunOptions+Scenario": {"RunOptions", "Scenario"}}
RESUMABLE = 0x20 | 0x80 | 0x200  # CO_GENERATOR, CO_COROUTINE, CO_ASYNC_GENERATOR


@functools.cache
def _start(code: CodeType) -> int:
    """Where a generator's or coroutine's frame stands at its first call event."""
    return next(i.offset for i in dis.get_instructions(code) if i.opname == "RESUME")


class Recorder:
    """The modules of the frames whose parameters hold a tracked object, by thread."""

    def __init__(self) -> None:
        self.records: dict[str, list[tuple[str, frozenset[str]]]] = {}

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not isinstance(module, str) or not module.startswith("loadtest."):
            return
        code = frame.f_code
        if code.co_flags & RESUMABLE and frame.f_lasti != _start(code):
            return
        local = frame.f_locals
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        # ``self`` is left out: an object's own method (a dataclass's __init__, a
        # Scenario's table()) is the object at work, not the object handed to a module.
        kinds = frozenset(
            type(local[n]).__name__
            for n in names
            if n != "self" and n in local and type(local[n]).__module__.startswith("loadtest.")
        )
        if kinds & SETS["RunOptions+Scenario"]:
            thread = threading.current_thread().name
            self.records.setdefault(thread, []).append((module, kinds))


def figures(paths: list[list[str]]) -> dict[str, Any]:
    """modules, visits and returns of the threads' paths, in turn, and the paths."""
    seen: set[str] = set()
    visits = returns = 0
    back: Counter[str] = Counter()
    for path in paths:
        for module in path:
            visits += 1
            if module in seen:
                returns += 1
                back[module] += 1
            seen.add(module)
    short = [[m.removeprefix("loadtest.") for m in p] for p in paths]
    return {
        "modules": len(seen),
        "visits": visits,
        "returns": returns,
        "returned_to": dict(back.most_common(5)),
        "paths": short,
    }


def collapse(modules: list[str]) -> list[str]:
    return [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]


def measure(command: str) -> dict[str, Any]:
    from loadtest.cli.main import main

    recorder = Recorder()
    with tempfile.TemporaryDirectory() as out:
        log = Path(out) / "output.txt"
        argv = [*ARGV[command].split(), "--out", str(Path(out) / "runs")]
        started = time.perf_counter()
        with (
            log.open("w") as sink,
            contextlib.redirect_stdout(sink),
            contextlib.redirect_stderr(sink),
        ):
            threading.setprofile(recorder)
            sys.setprofile(recorder)
            try:
                code = main(argv)
            finally:
                sys.setprofile(None)
                threading.setprofile(None)
        seconds = time.perf_counter() - started
        if code != 0:
            print(textwrap.indent(log.read_text()[-2000:], "  | "), file=sys.stderr)
    threads = sorted(recorder.records, key=lambda t: t != "MainThread")
    result: dict[str, Any] = {"command": command, "argv": ARGV[command], "exit_code": code}
    for label, tracked in SETS.items():
        paths = [
            collapse([m for m, kinds in recorder.records[t] if kinds & tracked]) for t in threads
        ]
        result[label] = figures([p for p in paths if p])
    result["threads"] = threads
    result["seconds"] = round(seconds, 1)
    return result


def _commit() -> str:
    import loadtest

    where = Path(loadtest.__file__).parent
    git = ["git", "-C", str(where), "rev-parse", "--short", "HEAD"]
    done = subprocess.run(git, capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", choices=sorted(ARGV), default="run")
    parser.add_argument("--json", action="store_true", help="the figures as JSON")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds before exit")
    args = parser.parse_args()
    faulthandler.dump_traceback_later(args.timeout, exit=True)
    result = {"commit": _commit(), **measure(args.command)}
    faulthandler.cancel_dump_traceback_later()
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"commit {result['commit']}: loadtest {result['argv']}")
    print(f"exit code {result['exit_code']}, {result['seconds']} s, threads {result['threads']}")
    print(f"{'objects':<22}{'modules':>8}{'visits':>8}{'returns':>8}  most returned to")
    for label in SETS:
        f = result[label]
        most = ", ".join(f"{m.removeprefix('loadtest.')} {n}" for m, n in f["returned_to"].items())
        print(f"{label:<22}{f['modules']:>8}{f['visits']:>8}{f['returns']:>8}  {most}")
    for label in SETS:
        for path in result[label]["paths"]:
            print(f"\npath, {label}:")
            print(textwrap.fill(" > ".join(path), 100, subsequent_indent="  "))
    return 0


if __name__ == "__main__":
    sys.exit(main())
