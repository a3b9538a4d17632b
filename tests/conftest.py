"""Shared helpers: scenarios built in code, and a run against the in-process simulator."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, settings
from jsonschema import Draft202012Validator

from loadtest._compat import kernel_stamps
from loadtest.config.scenario import Scenario, parse_scenario
from loadtest.datasets import build_pool
from loadtest.engine.runner import RunConfig, Runner, RunOutcome
from loadtest.sim import InProcessSim, SimConfig

# Property tests run the same examples every run (derandomized, no example database) and
# without deadlines a busy machine misses: a test's outcome must not be chance. Random
# exploration is benchmarks/fuzz_parsers.py's, or HYPOTHESIS_PROFILE=default.
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def _bytecode_outside_the_tree() -> None:
    """Let this process and the subprocesses it starts keep their bytecode, outside the tree.

    With PYTHONDONTWRITEBYTECODE (set where trees are kept free of ``__pycache__``) every
    ``python -m loadtest`` a test starts compiled all of loadtest again (~0.2 s of CPU
    each, hundreds of times a suite). A cache prefix keeps the tree as clean and lets a
    compiled module be reused; importlib checks each entry against its source's mtime and
    size, so an edited file is compiled afresh. A prefix the caller chose is kept.
    """
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return
    # In the temporary folder: modules imported from tests' tmp_path copies (the layer
    # check's tree, plugin packages) leave entries there too, and those must not pile up.
    default = Path(tempfile.gettempdir()) / f"loadtest-pycache-{os.getuid()}"
    prefix = os.environ.setdefault("PYTHONPYCACHEPREFIX", str(default))
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False


_bytecode_outside_the_tree()


@pytest.fixture
def kernel_stamping() -> Iterator[bool]:
    """Whether the kernel stamps received segments; held on for the test.

    Linux turns stamping on a moment after the first socket asks for it (a deferred
    static key), so the first reads of a fresh process can come unstamped: this keeps
    one stamped connection open and waits, up to 2 s, until its reads carry stamps.
    """
    if not sys.platform.startswith("linux"):
        yield False
        return
    listener = socket.create_server(("127.0.0.1", 0))
    with listener, socket.create_connection(listener.getsockname()) as client:
        peer, _ = listener.accept()
        with peer:
            client.setsockopt(socket.SOL_SOCKET, kernel_stamps.SO_TIMESTAMPNS, 1)
            deadline = time.monotonic() + 2.0
            stamped = False
            while not stamped and time.monotonic() < deadline:
                peer.sendall(b"x")
                _, anc, _, _ = client.recvmsg(16, socket.CMSG_SPACE(16))
                stamped = bool(anc)
                if not stamped:
                    time.sleep(0.005)
            yield stamped


@pytest.fixture(autouse=True)
def _loadtest_logger_as_it_was() -> Iterator[None]:
    """Each test leaves the ``loadtest`` logger as it found it.

    The CLI's ``main`` sets that logger up for a terminal (its own stderr handler, no
    propagation to the root), and tests call ``main`` in-process: without this, what a
    test's logging looks like would depend on which tests ran before it on its worker."""
    logger = logging.getLogger("loadtest")
    handlers, level, propagate = list(logger.handlers), logger.level, logger.propagate
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)
    logger.propagate = propagate


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def log_records(name: str) -> Iterator[list[logging.LogRecord]]:
    """Records of logger ``name`` (and below), caught by a handler on it.

    Not caplog: its handler sits on the root and on loggers that did not propagate when
    the test began, and the CLI's ``main`` (called in-process by other tests, at times from
    a thread still winding down) turns the ``loadtest`` logger's propagation off."""
    logger = logging.getLogger(name)
    handler, level = _Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def loadtest_here(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The command line run in this process: exit code, stdout and stderr as a
    subprocess would give them.

    A ``python -m loadtest`` costs ~1 CPU-s of imports before it does anything, and a
    run with workers starts its own fork server (another ~0.8 CPU-s of preloaded
    modules); in the test process both are paid once per xdist worker (the fork server
    is reused). Tests of the process itself (signals, a killed worker, a fresh install,
    entry points seen by a new interpreter) still start one."""
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO

    from loadtest.cli.main import main

    out, err = StringIO(), StringIO()
    here = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse's own exits
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(here)
    return subprocess.CompletedProcess(["loadtest", *args], code, out.getvalue(), err.getvalue())


FAST_SIM = SimConfig(ttft_ms=5.0, itl_ms=1.0, ttft_sigma=0.1, itl_sigma=0.1)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7},
            },
            "required": ["city", "days"],
        },
    },
}


def plugin_site(root: Path, module: str, group: str, entry: str, source: str) -> Path:
    """A folder to put on PYTHONPATH holding the module ``module`` (``source``) and a
    distribution registering ``entry`` (``name = module:OBJ``) in the entry-point group
    ``group``, its metadata as pip writes it: a plugin installed without installing."""
    site = root / "site"
    dist = site / f"{module}-0.1.dist-info"
    dist.mkdir(parents=True)
    (site / f"{module}.py").write_text(source)
    name = module.replace("_", "-")
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(f"[{group}]\n{entry}\n")
    return site


def shipped_with_grace(name: str, tmp: Path, grace_s: float) -> Path:
    """A copy in ``tmp`` of the shipped scenario ``name`` whose in-flight units get
    ``grace_s`` after the plan ends, its ``data/`` paths made absolute. The default 10 s
    ran on in sessions' think times and tool latencies after everything a test reads."""
    shipped = Path(__file__).resolve().parent.parent / "scenarios"
    text = (shipped / f"{name}.toml").read_text()
    assert text.count("\n[load]\n") == 1 and "grace_s" not in text
    text = text.replace("\n[load]\n", f"\n[load]\ngrace_s = {grace_s}\n")
    text = text.replace('"data/', f'"{shipped / "data"}/')
    path = tmp / f"{name}.toml"
    path.write_text(text)
    return path


def make_scenario(
    load: dict[str, Any],
    *,
    sources: list[dict[str, Any]] | None = None,
    tmp: Path | None = None,
    **top: Any,
) -> Scenario:
    """A scenario of inline prompts (or the given sources) with the given load table."""
    data: dict[str, Any] = {
        "name": "test",
        "max_tokens": 16,
        "sources": sources
        or [{"kind": "inline", "category": "chat", "prompts": [f"prompt {i}" for i in range(50)]}],
        "load": load,
        **top,
    }
    return parse_scenario(data, "test.toml", base_dir=tmp)


def tool_source(tmp: Path, n: int = 30) -> dict[str, Any]:
    """A jsonl source of prompts that offer the weather tool."""
    path = tmp / "tools.jsonl"
    lines = [
        orjson.dumps(
            {"messages": [{"role": "user", "content": f"weather {i}"}], "tools": [WEATHER_TOOL]}
        )
        for i in range(n)
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return {"kind": "jsonl", "category": "tools", "path": str(path)}


async def run_against(
    sim: InProcessSim, scenario: Scenario, run_dir: Path, **kw: Any
) -> tuple[Runner, RunOutcome]:
    """Run a scenario against an already started simulator."""
    pool, _ = build_pool(scenario)
    runner = Runner(
        RunConfig(scenario=scenario, endpoint=sim.url, model="sim-llm", run_dir=run_dir),
        pool,
        **kw,
    )
    return runner, await runner.run()


def blocks(outcome: RunOutcome) -> dict[str, Any]:
    """The run's summary blocks (fault verdicts, the scraped server, agent tasks...),
    merged from the parts its hooks handed in, as the summary gets them."""
    from loadtest.engine.blocks import merge_blocks

    return merge_blocks(outcome.blocks, outcome.metrics)


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every line of a JSONL file."""
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


_SUMMARY_SCHEMA = Path(__file__).resolve().parent.parent / "docs" / "summary.schema.json"


@pytest.fixture(scope="session")
def summary_validator() -> Draft202012Validator:
    """The published JSON Schema of summary.json, checked once per session."""
    schema = orjson.loads(_SUMMARY_SCHEMA.read_bytes())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@pytest.fixture(autouse=True)
def _summaries_match_the_schema(
    request: pytest.FixtureRequest, summary_validator: Draft202012Validator
) -> Iterator[None]:
    """Every summary.json a test writes under its tmp_path validates against the schema,
    and every figure of it (and of a capacity.json, comparison.json or decision.json)
    has its row in docs/metrics.md's catalogue (``tests/catalogue.py``)."""
    # Asked for before the test runs, so tmp_path is torn down after this check.
    tmp: Path | None = (
        request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    )
    yield
    if tmp is None:
        return
    for path in tmp.rglob("summary.json"):
        try:
            data = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            continue  # a test that writes a broken file on purpose
        errors = sorted(summary_validator.iter_errors(data), key=lambda e: e.json_path)
        if errors and not _deliberately_broken(path):
            lines = [f"{e.json_path}: {e.message}" for e in errors[:5]]
            pytest.fail(f"{path} breaks docs/summary.schema.json:\n" + "\n".join(lines))
    _figures_are_in_the_catalogue(tmp, summary_validator.schema)


def _figures_are_in_the_catalogue(tmp: Path, summary_schema: Any) -> None:
    """Fail on a number or boolean of a result file under ``tmp`` that no row of the
    catalogue defines; a plugin's own block (a key the published schema does not have)
    is its plugin's to document."""
    from tests.catalogue import file_kind, leaves, undefined

    top = summary_schema["$ref"].rsplit("/", 1)[-1]
    own = set(summary_schema["$defs"][top]["properties"])
    for path in tmp.rglob("*.json"):
        kind = file_kind(path)
        if kind is None or _deliberately_broken(path):
            continue
        try:
            data = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            continue
        if not isinstance(data, dict):
            continue
        if kind == "summary.json":
            data = {k: v for k, v in data.items() if k in own}
        missing = undefined(kind, set(leaves(data)))
        if missing:
            pytest.fail(f"{path}: figures docs/metrics.md's catalogue does not define: {missing}")


def _deliberately_broken(path: Path) -> bool:
    # Tests of the error messages write bad summaries on purpose, beside a marker.
    return (path.parent / ".invalid-on-purpose").exists()


LONGEST_FIRST = (
    "test_ray",
    "test_wheel",
    "test_workers_scenarios",
    "test_shipped_scaleout",
    "test_plugins",
    "test_workers",
    "test_tui",
    "test_ab_sweep",
    "test_cli",
    "test_report",
    "test_draft_sweep",
    "test_faults_e2e",
    "test_fail_on",
)
"""The files that take longest, longest first (their longest tests: 20-55 s each under
``-n 4`` on 2 cores).

xdist hands out whole files (``--dist loadfile``) in collection order when told not to
reorder them by their number of tests (``--no-loadscope-reorder``, scripts/test.sh):
started last, the longest files ran on with the other workers idle. Scheduling only:
a file not named here runs after these, in collection order."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The llama.cpp files are marked ``llama``: llama.cpp's threads spin, and beside
    other CPU work on 2 cores its answers slowed tenfold (58 s for 72 tokens), so
    scripts/test.sh runs them alone, after the rest. (The rest go to xdist workers a file
    each, ``--dist loadfile``, so that module fixtures are built once; the longest files
    first, ``LONGEST_FIRST``.)"""
    for item in items:
        if item.path.stem.startswith("test_llama"):
            item.add_marker(pytest.mark.llama)
        elif item.path.stem.startswith("test_vllm"):  # vLLM's threads spin too
            item.add_marker(pytest.mark.vllm)
    rank = {stem: i for i, stem in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.stem, len(rank)))  # stable


@pytest.fixture(scope="session")
def llama_baseline() -> Iterator[str]:
    """One plain llama.cpp server (no speculation) for every llama test file that only
    reads from one: each start loads the model and sizes the KV cache again."""
    from tests.llama_servers import start, stop

    proc, url = start("none")
    yield url
    stop(proc)


_PLUGIN = Path(__file__).resolve().parent / "plugins" / "lines_source"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test plugin package (``tests/plugins/lines_source``) installed into a folder of
    its own, not into the environment the suite runs in: a process sees it only where its
    ``PYTHONPATH`` names the folder (``tests/test_plugins.py``, ``tests/test_ray.py``)."""
    target = tmp_path_factory.mktemp("plugin-site")
    # Built from a copy: a build leaves build/ and *.egg-info beside its sources.
    source = tmp_path_factory.mktemp("plugin-src") / "lines_source"
    shutil.copytree(_PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
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
