"""How often the default scenario's fault verdict comes out the same (not a test).

    python -m benchmarks.bench_fault_verdicts              # 20 runs of scenarios/mixed.toml
    python -m benchmarks.bench_fault_verdicts -n 5 --short # 5 runs of a 12 s variant

Each run is ``loadtest run mixed --no-tui`` against the built-in simulated speculative
deployment, with its draft outage; the figures are the count of each verdict word per
window over the runs, and the reasons given. A verdict that flips between runs of an
unchanged deployment is a defect of the verdict: the target is one word in >= 19 of 20.
Extra arguments after ``--`` go to ``loadtest run`` as they are (e.g. ``-- --duration 15``).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parent.parent
MIXED = ROOT / "scenarios" / "mixed.toml"

# The short variant: 12 s of load, the draft down from 5 s to 8 s (4 s after it).
_SHORT = (
    ("duration_s = 20", "duration_s = 12"),
    ("warmup_s = 2", "warmup_s = 1"),
    ("at_s = 9", "at_s = 5"),
    ("duration_s = 5", "duration_s = 3"),
)


def short_scenario(folder: Path) -> Path:
    """mixed.toml with its load and its outage shortened (same deployment and prompts)."""
    text = MIXED.read_text()
    for old, new in _SHORT:
        if old not in text:
            raise SystemExit(f"mixed.toml changed: no {old!r} to shorten")
        text = text.replace(old, new, 1)
    path = folder / "mixed-short.toml"
    path.write_text(text)
    return path


def one_run(scenario: Path, out: Path, extra: list[str]) -> list[tuple[str, str, str]]:
    """(window, verdict, reason) of each fault window of one run."""
    cmd = [sys.executable, "-m", "loadtest", "run", str(scenario), "--no-tui", "-q"]
    cmd += ["--out", str(out), "--fail-on", "never", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    summaries = sorted(out.glob("*/summary.json"))
    if not summaries:
        raise SystemExit(f"no summary (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    summary = orjson.loads(summaries[-1].read_bytes())
    return [(f["name"], f["verdict"], f["reason"]) for f in summary.get("faults", [])]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", "--runs", type=int, default=20, help="runs (default: 20)")
    ap.add_argument("--short", action="store_true", help="a 12 s variant of the scenario")
    ap.add_argument("extra", nargs="*", help="flags for loadtest run (after --)")
    args = ap.parse_args()
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    reasons: dict[tuple[str, str], Counter[str]] = defaultdict(Counter)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        scenario = short_scenario(folder) if args.short else MIXED
        for i in range(args.runs):
            t0 = time.perf_counter()
            windows = one_run(scenario, folder / f"run{i}", args.extra)
            for name, verdict, reason in windows:
                counts[name][verdict] += 1
                reasons[(name, verdict)][reason] += 1
            words = ", ".join(f"{n}: {v}" for n, v, _ in windows)
            print(f"run {i + 1}/{args.runs} ({time.perf_counter() - t0:.0f} s): {words}")
            sys.stdout.flush()
    print()
    for name, c in counts.items():
        top, n = c.most_common(1)[0]
        print(f"{name}: " + ", ".join(f"{v} {k}" for k, v in c.most_common()))
        print(f"  most common: {top} in {n} of {args.runs}")
        for (window, verdict), rs in reasons.items():
            if window == name:
                for reason, k in rs.most_common(3):
                    print(f"    {verdict} x{k}: {reason}")


if __name__ == "__main__":
    main()
