"""The layering contracts hold, and they are able to fail.

``lint-imports`` reads ``[tool.importlinter]`` from pyproject.toml. A contract that no
import could break would be decoration, so the same check runs on a copy of the package
with one wrong-way import added (the engine reaching up into the report), and must fail
there, naming that import.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which(
    "lint-imports"
)

pytestmark = pytest.mark.skipif(LINT is None, reason="import-linter is not installed")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    assert LINT is not None
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.run(
        [LINT, "--no-logo", "--no-cache", str(tree / "pyproject.toml")],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    shutil.copytree(
        ROOT / "loadtest", tree / "loadtest", ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_contracts_hold_on_the_package(tmp_path: Path) -> None:
    done = _lint(_copy(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_a_wrong_way_import_breaks_the_layers(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    stop = tree / "loadtest" / "engine" / "stop.py"
    # Lazy, inside a function: the contracts count those too.
    stop.write_text(
        stop.read_text() + "\n\ndef _up() -> None:\n    import loadtest.report.summary  # noqa\n"
    )
    done = _lint(tree)
    assert done.returncode != 0
    assert "loadtest.engine.stop -> loadtest.report.summary" in done.stdout


def test_the_simulator_may_not_reach_into_the_load_side(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    engine = tree / "loadtest" / "sim" / "engine.py"
    engine.write_text(engine.read_text() + "\nfrom loadtest.measure import hdr  # noqa\n")
    done = _lint(tree)
    assert done.returncode != 0
    assert "loadtest.sim.engine -> loadtest.measure.hdr" in done.stdout


def test_nothing_inside_loadtest_imports_the_plugin_api(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    outputs = tree / "loadtest" / "report" / "outputs.py"
    outputs.write_text(
        outputs.read_text() + "\n\ndef _api() -> None:\n    import loadtest.plugins  # noqa\n"
    )
    done = _lint(tree)
    assert done.returncode != 0
    assert "loadtest.report.outputs -> loadtest.plugins" in done.stdout


def test_the_registry_sits_below_the_model(tmp_path: Path) -> None:
    tree = _copy(tmp_path)
    registry = tree / "loadtest" / "registry.py"
    registry.write_text(registry.read_text() + "\nfrom loadtest.model import json  # noqa\n")
    done = _lint(tree)
    assert done.returncode != 0
    assert "loadtest.registry -> loadtest.model.json" in done.stdout


def test_the_flag_declarations_sit_below_everything_that_declares_flags(tmp_path: Path) -> None:
    # RunOptions (app) and the engines' options declare their flags with loadtest.flag:
    # the declarations may import nothing above the errors, or the config they check
    # would be pulled into every --help.
    tree = _copy(tmp_path)
    flag = tree / "loadtest" / "flag.py"
    flag.write_text(flag.read_text() + "\nfrom loadtest.config import scenario  # noqa\n")
    done = _lint(tree)
    assert done.returncode != 0
    assert "loadtest.flag -> loadtest.config.scenario" in done.stdout


@pytest.mark.parametrize(
    ("module", "imports", "contract"),
    [
        # A fault kind reaching into the agent's tasks: the features stand apart.
        ("features/faults/kinds/cancel.py", "loadtest.features.agent.tools", "stand apart"),
        # The agent reaching into a workload kind.
        ("features/agent/tools.py", "loadtest.features.workloads.trace", "stand apart"),
        # The server scrape reaching up into the fault kinds that use it.
        ("features/scrape.py", "loadtest.features.faults.rig", "sit below"),
        # The dashboard reaching into the fault rig instead of reading the hooks' feeds.
        ("tui/feed.py", "loadtest.features.faults.rig", "The dashboard shows"),
        # The application layer by use case: an engine reaching up into ab's sides, a
        # worker into the run that starts it, one process into its scale-out, a sweep
        # into ab.
        ("app/engines/llama.py", "loadtest.app.ab.sides", "by use case"),
        ("app/scale/worker_main.py", "loadtest.app.run.job", "by use case"),
        ("app/process/inprocess.py", "loadtest.app.scale.workers", "by use case"),
        ("app/capacity/sweep.py", "loadtest.app.ab.sweep", "by use case"),
    ],
)
def test_a_feature_reaching_into_another_breaks_its_contract(
    tmp_path: Path, module: str, imports: str, contract: str
) -> None:
    tree = _copy(tmp_path)
    path = tree / "loadtest" / module
    path.write_text(
        path.read_text() + f"\n\ndef _across() -> None:\n    import {imports}  # noqa\n"
    )
    done = _lint(tree)
    assert done.returncode != 0
    name = "loadtest." + module.removesuffix(".py").replace("/", ".")
    assert f"{name} -> {imports}" in done.stdout, done.stdout[-3000:]
    broken = done.stdout.split("Broken contracts")[1]
    assert contract in broken


def test_no_wrong_way_import_is_excused() -> None:
    """config reads feature tables through a registry, and the [sim] table is checked in
    the app layer, and the simulator launches without the CLI: no contract lists an
    exception."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    ignored = [i for c in contracts for i in c.get("ignore_imports", [])]
    assert ignored == []


def test_the_simulator_names_the_command_line_in_no_form() -> None:
    """Not imported, not by a string to ``importlib``: a forked simulator gets its
    ``SimConfig`` as it is, and ``python -m loadtest.sim`` hands over to the command by
    ``exec``, not by importing it."""
    sim = ROOT / "loadtest" / "sim"
    named = [p.name for p in sim.rglob("*.py") if "loadtest.cli" in p.read_text()]
    assert named == []


def test_config_names_no_feature_even_lazily(tmp_path: Path) -> None:
    """The contract sees a lazy import from config into a feature (what the registry
    replaced), so the layers contract would fail on it."""
    tree = _copy(tmp_path)
    scenario = tree / "loadtest" / "config" / "scenario.py"
    scenario.write_text(
        scenario.read_text()
        + "\n\ndef _up() -> None:\n    import loadtest.features.faults.plan  # noqa\n"
    )
    done = _lint(tree)
    assert done.returncode != 0
    assert "loadtest.config.scenario -> loadtest.features.faults.plan" in done.stdout
