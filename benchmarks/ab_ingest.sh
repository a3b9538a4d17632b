#!/usr/bin/env bash
# Alternating runs of the ingest benchmark on two checkouts (the redesign's "no slower"
# check): loadtest's and the plain aiohttp reader's chunks per CPU-second, and their
# ratio, for each run.   usage: benchmarks/ab_ingest.sh OLD_TREE NEW_TREE [ROUNDS]
set -euo pipefail
old=$1 new=$2 rounds=${3:-5}
tmp=$(mktemp)
for i in $(seq "$rounds"); do
  for tree in "$old" "$new"; do
    (cd "$tree" && PYTHONPATH="$tree" python -m benchmarks.bench_client --quick --only ingest \
      --json "$tmp" >/dev/null 2>&1)
    python - "$tree" "$tmp" <<'PY'
import json, sys
ing = json.load(open(sys.argv[2]))["ingest"]
lt = ing["loadtest_asyncio"]["chunks_per_cpu_s"]
plain = ing["plain_aiohttp_lines"]["chunks_per_cpu_s"]
print(f"{sys.argv[1]}\tloadtest {lt}\tplain {plain}\tratio {lt / plain:.2f}", flush=True)
PY
  done
done
rm -f "$tmp"
