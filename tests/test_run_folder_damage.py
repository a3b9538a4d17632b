"""Every command that reads a run folder, on the folder with each file missing, empty or
cut mid-line: one clear error naming the file (exit 2, a bad input), or the documented
work from what is left (a killed run's summary rebuilt from requests.jsonl), never a
traceback.

Two folders are damaged: a finished run's, and the same run as a kill leaves it (no
summary.json, summary.csv or .hgrm files). ``view`` needs a terminal, so its reader
(``ReplaySource``, every frame) stands in for it; its errors are the ones ``main`` turns
into exit 2.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from loadtest.errors import ResultFileError, UsageError
from loadtest.tui.sources import ReplaySource
from tests.conftest import loadtest_here

SCENARIO = """
name = "damage"
max_tokens = 8
[[sources]]
kind = "inline"
category = "chat"
prompts = ["a", "b", "c"]
[load]
concurrency = 2
requests = 20
[sim]
ttft_ms = 5.0
itl_ms = 1.0
"""

HGRM = tuple(
    f"{m}.hgrm"
    for m in (
        "client_lag_ms",
        "dispatch_lag_ms",
        "e2e_ms",
        "e2e_ms_corrected",
        "itl_ms",
        "tokens_per_chunk",
        "tokens_per_step",
        "tpot_ms",
        "ttfa_ms",  # time to the first answer token: ttft's own where nothing reasoned
        "ttfa_ms_corrected",
        "ttft_ms",
        "ttft_ms_corrected",
    )
)
FILES = (
    "summary.json",
    "requests.jsonl",
    "histograms.hlog",
    "metrics.jsonl",
    "run.json",
    "summary.csv",
    *HGRM,
)
"""Every file a simulator run writes (the fixture checks the folder holds exactly these)."""
KILLED_GONE = ("summary.json", "summary.csv", *HGRM)
"""What a run killed before its end never wrote."""
KILLED = tuple(f for f in FILES if f not in KILLED_GONE)
DAMAGES = ("missing", "empty", "truncated")
COMMANDS = ("report", "summarize", "compare", "export-jsonl", "export-otlp", "fit", "view")
REPORT_READS = ("summary.json", "requests.jsonl", "histograms.hlog", "metrics.jsonl", "run.json")
"""The files ``report`` may read (its ~1 s a case is spent on these; the .hgrm files and
summary.csv are outputs no command reads, and the other commands cover them)."""


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A finished simulator run, and a copy of it as a kill leaves it."""
    tmp = tmp_path_factory.mktemp("damage")
    scenario = tmp / "damage.toml"
    scenario.write_text(SCENARIO)
    res = loadtest_here("run", str(scenario), "--out", str(tmp / "out"), "--no-tui", "-q")
    assert res.returncode == 0, res.stderr
    (finished,) = (tmp / "out").iterdir()
    assert sorted(p.name for p in finished.iterdir()) == sorted(FILES)
    killed = tmp / "killed" / finished.name
    shutil.copytree(finished, killed, ignore=shutil.ignore_patterns(*KILLED_GONE))
    return {"finished": finished, "killed": killed}


def _damage(path: Path, how: str) -> None:
    if how == "missing":
        path.unlink()
    elif how == "empty":
        path.write_bytes(b"")
    else:  # cut in the middle of a line, as a disk that filled or a copy cut short
        data = path.read_bytes()
        cut = len(data) // 2
        while data[cut - 1 : cut] == b"\n":
            cut += 1
        path.write_bytes(data[:cut])


def _expect(command: str, base: str, name: str, how: str) -> str | None:
    """The file the one-line error must name, or None where the command works."""
    if command == "fit" and base == "killed":
        return "summary.json"  # the fit reads the run's own summary, never a rebuild
    if name == "summary.json":
        if how == "missing":
            # Read as a killed run's: rebuilt from requests.jsonl (fit: see above).
            return "summary.json" if command == "fit" else None
        return None if command == "export-jsonl" else "summary.json"
    if name == "requests.jsonl":
        if base == "finished":
            # A finished folder's summary counts every request: fewer lines is damage.
            return None if command in ("report", "summarize") else "requests.jsonl"
        if how == "missing":
            return "requests.jsonl"
        if how == "empty" and command.startswith("export"):
            return "requests.jsonl"  # "no request to export"
        return None  # a torn last line, or no line yet: what a kill leaves
    if name == "histograms.hlog" and command == "view" and how != "truncated":
        return "histograms.hlog"  # its frames are the log's intervals
    if name == "run.json" and base == "killed" and how != "missing":
        # The rebuild reads it (without it: "unknown", as documented); export-jsonl
        # reads only the lines.
        return None if command == "export-jsonl" else "run.json"
    return None


def _command(command: str, folder: Path, intact: Path) -> tuple[int, str, Path | None]:
    """Run ``command`` on ``folder``: its exit code, its stderr and the file it writes."""
    out = folder.parent / "written"
    if command == "view":
        try:
            replay = ReplaySource(folder)
            for i in range(replay.n):
                replay.position = i
                replay.frame("e2e_ms", "all")
        except (UsageError, ResultFileError) as exc:  # main: "loadtest: ...", exit 2
            return 2, f"loadtest: {exc}", None
        return 0, "", None
    argv = {
        "report": ["report", str(folder), "--out", str(out)],
        "summarize": ["summarize", str(folder)],
        "compare": ["compare", str(intact), str(folder)],
        "export-jsonl": ["export-trace", str(folder), "-o", str(out)],
        "export-otlp": ["export-trace", str(folder), "--format", "otlp", "-o", str(out)],
        "fit": ["sim", "--fit", str(folder), "--write", str(out)],
    }[command]
    res = loadtest_here(*argv)
    written = {"summarize": folder / "summary.json", "compare": None}.get(command, out)
    return res.returncode, res.stderr, written


def _cases() -> list[tuple[str, str, str, str]]:
    cases = []
    for command in COMMANDS:
        for base, names in (("finished", FILES), ("killed", KILLED)):
            for name in names:
                if command == "report" and name not in REPORT_READS:
                    continue
                cases += [(command, base, name, how) for how in DAMAGES]
    return cases


@pytest.mark.parametrize(("command", "base", "name", "how"), _cases())
def test_a_damaged_run_folder_is_one_clear_error_or_read_as_documented(
    runs: dict[str, Path], tmp_path: Path, command: str, base: str, name: str, how: str
) -> None:
    folder = tmp_path / runs[base].name
    shutil.copytree(runs[base], folder)
    _damage(folder / name, how)
    code, err, written = _command(command, folder, runs["finished"])
    assert "Traceback" not in err
    named = _expect(command, base, name, how)
    if named is None:
        # compare exits 1 where a side measured nothing (a killed run with no line yet)
        # or ran an unknown load (a killed run without run.json), as documented.
        judged = (name, how) in (("requests.jsonl", "empty"), ("run.json", "missing"))
        assert code == (1 if command == "compare" and base == "killed" and judged else 0), err
        assert not [x for x in err.splitlines() if x.startswith("loadtest:")], err
        assert written is None or written.stat().st_size > 0
        return
    assert code == 2, err
    (line,) = [x for x in err.splitlines() if x.startswith("loadtest:")]
    assert err.strip().endswith(line), err  # the error is the last thing said
    assert str(folder) in line and named in line, line


def test_report_reads_none_of_the_outputs_it_is_not_given(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    """The .hgrm files and summary.csv are for other tools: a report without them all
    is the same report (they are left out of the matrix above for report's time)."""
    folder = tmp_path / runs["finished"].name
    shutil.copytree(runs["finished"], folder, ignore=shutil.ignore_patterns("*.hgrm", "*.csv"))
    res = loadtest_here("report", str(folder), "--out", str(tmp_path / "r.html"))
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "r.html").stat().st_size > 0


@pytest.mark.parametrize("how", ["missing", "empty"])
def test_a_report_without_its_interval_log_says_so_on_the_page(
    runs: dict[str, Path], tmp_path: Path, how: str
) -> None:
    folder = tmp_path / runs["finished"].name
    shutil.copytree(runs["finished"], folder)
    _damage(folder / "histograms.hlog", how)
    res = loadtest_here("report", str(folder), "--out", str(tmp_path / "r.html"))
    assert res.returncode == 0, res.stderr
    page = (tmp_path / "r.html").read_text()
    assert "histograms.hlog: missing or empty, so no plots over time." in page


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A two-step sweep's folder and an ab's, each of one short simulator run a step or
    a side (their runs' own files are the run folders' above)."""
    tmp = tmp_path_factory.mktemp("reports")
    scenario = tmp / "damage.toml"
    scenario.write_text(SCENARIO)
    for argv in (
        ("sweep", str(scenario), "--concurrency", "1,2", "--out", str(tmp / "sweep")),
        ("ab", str(scenario), "--baseline", "sim:none", "--candidate", "sim:none"),
    ):
        out = () if argv[0] == "sweep" else ("--repeat", "1", "--out", str(tmp / "ab"))
        res = loadtest_here(*argv, *out, "--no-tui", "-q")
        assert res.returncode == 0, res.stderr
    ((sweep,), (ab,)) = ((tmp / "sweep").iterdir(), (tmp / "ab").iterdir())
    return {"capacity.json": sweep, "comparison.json": ab}


@pytest.mark.parametrize("name", ["capacity.json", "comparison.json"])
@pytest.mark.parametrize("how", DAMAGES)
def test_a_sweep_or_ab_folder_without_its_table_is_one_line_naming_it(
    reports: dict[str, Path], tmp_path: Path, name: str, how: str
) -> None:
    """``report`` of a sweep draws from capacity.json, of an ab from comparison.json: a
    folder whose table is gone or broken is named, with the file."""
    folder = tmp_path / reports[name].name
    shutil.copytree(reports[name], folder)
    _damage(folder / name, how)
    res = loadtest_here("report", str(folder), "--out", str(tmp_path / "r.html"))
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    (line,) = res.stderr.strip().splitlines()
    assert line.startswith(f"loadtest: {folder}") and name in line, line
