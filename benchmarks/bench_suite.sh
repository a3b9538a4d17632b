#!/usr/bin/env bash
# The README's test command N times in a row (default 5): wall time, exit code and the
# pytest result lines of each run, then how many passed. Run it on a quiet machine: the
# figure it measures is the suite's own time, and stray servers from an earlier run
# (e.g. `ps aux | grep serve-llama`) would share the cores.
#   benchmarks/bench_suite.sh [N] [LOGDIR]
set -uo pipefail
cd "$(dirname "$0")/.."
n=${1:-5}
logs=${2:-$(mktemp -d /tmp/bench-suite-XXXX)}
mkdir -p "$logs"
passed=0
for i in $(seq 1 "$n"); do
    start=$(date +%s.%N)
    scripts/test.sh >"$logs/run$i.log" 2>&1
    code=$?
    end=$(date +%s.%N)
    secs=$(echo "$end - $start" | bc)
    [ "$code" -eq 0 ] && passed=$((passed + 1))
    results=$(grep -E "^[0-9]+ (passed|failed)|^(FAILED|ERROR) " "$logs/run$i.log" | tr '\n' ' ')
    printf 'run %d: exit %d in %.0f s  %s\n' "$i" "$code" "$secs" "$results" | tee -a "$logs/summary.txt"
done
echo "$passed of $n runs passed (logs: $logs)" | tee -a "$logs/summary.txt"
