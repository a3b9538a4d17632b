"""``ab --baseline vllm:none --candidate vllm:ngram``: ab starts real vLLM itself, one
server at a time (each ~6.5 GB), health-checks it, measures its cold start and memory,
reads its acceptance from /metrics and stops it with the run.

Needs the ``vllm`` extra: skipped without it unless ``LOADTEST_REQUIRE_VLLM=1``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import psutil
import pytest

from tests.vllm_servers import require_vllm_extra

require_vllm_extra()

pytestmark = pytest.mark.timeout(1500)

REPETITIVE = [
    "Continue the list exactly: apple, banana, cherry, apple, banana, cherry, apple, banana,",
    "Count upwards in words: one, two, three, four, five, six, seven, eight, nine, ten,",
    "Repeat the sentence: the cat sat on the mat, the cat sat on the mat, the cat sat on",
]


def _vllm_processes() -> list[int]:
    """vLLM processes that are children of this test process (none may be left)."""
    me = psutil.Process()
    return [p.pid for p in me.children(recursive=True) if "vllm" in " ".join(p.cmdline())]


def test_ab_of_vllm_none_against_ngram(tmp_path: Path) -> None:
    scenario = tmp_path / "tiny.toml"
    prompts = str(REPETITIVE).replace("'", '"')
    scenario.write_text(
        'name = "tiny"\nstream = true\nmax_tokens = 24\nseed = 1\n'
        "[sampling]\ntemperature = 0.0\n"
        f'[[sources]]\nkind = "inline"\ncategory = "repetitive"\nprompts = {prompts}\n'
        '[load]\nmode = "closed"\nconcurrency = 2\nrequests = 10\nwarmup_s = 0\n'
    )
    out = tmp_path / "ab"
    argv = ["ab", str(scenario), "--baseline", "vllm:none", "--candidate", "vllm:ngram"]
    done = subprocess.run(
        # One start a side of 10 requests (compare judges a metric on >= 10 values).
        [sys.executable, "-m", "loadtest", *argv, "--repeat", "1", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1400,
    )
    assert done.returncode in (0, 1), done.stdout[-2000:] + done.stderr[-2000:]
    assert not _vllm_processes()  # stopped with the run
    (folder,) = out.iterdir()
    c = orjson.loads((folder / "comparison.json").read_bytes())
    assert not c["blocking"], c["findings"]
    for side, name in (("a", "vllm:none"), ("b", "vllm:ngram")):
        cost = c[side]["deployment_cost"]
        assert cost["deployment"] == name and cost["starts"] == 1
        assert 0 < cost["ready_s"] < cost["first_token_s"] < 900
        # Weights, a 2 GB KV cache, torch: gigabytes, in the process tree ab sampled.
        assert 2000 < cost["rss_steady_mib"] <= cost["rss_peak_mib"]
        assert c[side]["completion_rate"] == 1.0
    assert c["a"]["acceptance_rate_metrics"] is None  # no drafts: no rate
    assert c["b"]["acceptance_rate_metrics"] > 0.5  # repetitive text, n-gram drafts
    assert "deployment cost" in done.stdout
