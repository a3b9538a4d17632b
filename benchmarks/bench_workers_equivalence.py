"""How far a two-worker run's medians sit from a one-process run's, run after run.

The setup of tests/test_workers.py's equivalence test (8 sessions, 160 requests, fixed
TTFT 20 ms / ITL 4 ms / 24 tokens, no drawn spread), repeated: per pair the p50 difference
B - A and its 95% bootstrap interval for TTFT, TPOT and e2e, then the largest |interval
end| per metric in ms and in % of A. The test's margin is derived from these figures.

    python -m benchmarks.bench_workers_equivalence [PAIRS]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

SCENARIO = (
    'name = "w"\nmax_tokens = 24\n[[sources]]\nkind = "inline"\n'
    'prompts = ["a", "b", "c", "d"]\n[load]\nconcurrency = 8\nrequests = 160\n'
    "[sim]\nttft_ms = 20.0\nitl_ms = 4.0\nmin_output_fraction = 1.0\nttft_sigma = 0.0\n"
    "itl_sigma = 0.0\n"
)


def _run(sc: Path, out: Path, *extra: str) -> Path:
    cmd = [sys.executable, "-m", "loadtest", "run", str(sc), "--no-tui", "-q", "--seed", "3"]
    subprocess.run([*cmd, "--out", str(out), *extra], check=True, capture_output=True)
    (run_dir,) = out.iterdir()
    return run_dir


def main() -> None:
    from loadtest.report.compare import compare_runs, load_run

    pairs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    worst: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sc = Path(tmp) / "w.toml"
        sc.write_text(SCENARIO)
        for i in range(pairs):
            one = load_run(_run(sc, Path(tmp) / f"one{i}"))
            two = load_run(_run(sc, Path(tmp) / f"two{i}", "--workers", "2"))
            c = compare_runs([one], [two], resamples=1000)
            cells = []
            for m in ("ttft_ms", "tpot_ms", "e2e_ms"):
                p = c["metrics"][m]["percentiles"]["p50"]
                a, low, high = p["a"], p["ci_low"], p["ci_high"]
                assert a is not None
                assert low is not None
                assert high is not None
                far = max(abs(low), abs(high))
                ms, pct = worst.get(m, (0.0, 0.0))
                worst[m] = (max(ms, far), max(pct, 100 * far / a))
                cells.append(f"{m} a={a:.2f} diff={p['diff']:+.2f} [{low:+.2f}, {high:+.2f}]")
            print(f"pair {i + 1}: " + "; ".join(cells), flush=True)
    for m, (ms, pct) in worst.items():
        print(f"{m}: largest |interval end| {ms:.2f} ms = {pct:.1f}% of A")


if __name__ == "__main__":
    main()
