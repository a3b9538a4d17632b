"""A third-party prompt source runs without editing loadtest: installed, found, used.

``tests/plugins/lines_source`` is a package as another project would ship it. The test
installs it into a folder of its own (not into the environment the suite runs in) and
runs a scenario naming its kind from a subprocess that sees that folder.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from loadtest.config.scenario import parse_scenario
from loadtest.config.sources import source_kinds, source_plugin
from loadtest.errors import ScenarioError
from tests.conftest import read_jsonl

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "tests" / "plugins" / "lines_source"


def test_loadtests_own_kinds_are_registered_plugins() -> None:
    kinds = source_kinds()
    for kind in ("sharegpt", "bfcl", "humaneval", "jsonl", "inline", "synthetic", "trace"):
        assert kind in kinds
        plugin = source_plugin(kind)
        assert isinstance(plugin.keys, frozenset)
    assert source_plugin("jsonl").needs_path and not source_plugin("inline").needs_path


def test_an_unknown_kind_is_named_with_those_installed(tmp_path: Path) -> None:
    data = {"name": "x", "sources": [{"kind": "lines"}]}
    with pytest.raises(ScenarioError, match=r"sources\[0\]\.kind.*inline") as err:
        parse_scenario(data, str(tmp_path / "x.toml"))
    assert "lines" in str(err.value)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("plugin-site")
    # Built from a copy: a build leaves build/ and *.egg-info beside its sources.
    source = tmp_path_factory.mktemp("plugin-src") / "lines_source"
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(target),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return target


def test_a_plugin_source_is_found_and_its_own_keys_reach_it(
    installed: Path, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("first question\n\nsecond question\nthird question\n")
    sc = tmp_path / "p.toml"
    sc.write_text(
        'name = "p"\nmax_tokens = 8\nrecord_prompts = true\n'
        '[[sources]]\nkind = "lines"\ncategory = "mine"\npath = "prompts.txt"\n'
        'prefix = "Q: "\nlimit = 2\n'
        "[load]\nconcurrency = 2\nrequests = 6\n[sim]\nttft_ms = 2.0\nitl_ms = 1.0\n"
    )
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(installed), str(ROOT)]))
    res = subprocess.run(
        [sys.executable, "-m", "loadtest", "run", str(sc), "--no-tui", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    (run_dir,) = out.iterdir()
    s = orjson.loads((run_dir / "summary.json").read_bytes())
    assert s["requests"]["ok"] == 6
    rows = read_jsonl(run_dir / "requests.jsonl")
    assert {r["category"] for r in rows} == {"mine"}
    assert {r["prompt_id"] for r in rows} <= {"line-0", "line-1"}
    sent = {m["content"] for r in rows for m in r["messages"]}
    assert sent <= {"Q: first question", "Q: second question"}, sent
    # A key the plugin does not declare is an error naming it, as for loadtest's kinds.
    sc.write_text(sc.read_text().replace('prefix = "Q: "', 'prefix = "Q: "\nsuffix = "?"'))
    res = subprocess.run(
        [sys.executable, "-m", "loadtest", "run", str(sc), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert res.returncode == 2 and "suffix" in res.stderr, res.stderr[-1000:]
