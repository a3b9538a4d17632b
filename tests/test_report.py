"""HTML reports of a run, a sweep and an ab comparison, opened in headless Chromium."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from loadtest.cli.main import main

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# CI installs Debian's chromium and sets this, so the browser test runs there, not skips.
REQUIRE_BROWSER = os.environ.get("LOADTEST_REQUIRE_BROWSER") == "1"

SCENARIO = """
name = "rep"
max_tokens = 16
[[sources]]
kind = "inline"
prompts = ["a", "b", "c"]
[load]
concurrency = 4
duration_s = {duration}
[sim]
ttft_ms = 5.0
itl_ms = 2.0
[slo]
ttft_ms.p95 = 5000
[faults]
[[faults.events]]
kind = "cancel"
name = "cancel-some"
at_s = 0.5
duration_s = 1.0
fraction = 0.5
after_tokens = 3
"""


# Built once per session: with module scope they were rebuilt (~35 s of CPU each time)
# whenever the worker ran a test of another file in between.
@pytest.fixture(scope="session")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One run with a fault window, a two-step sweep and a one-repeat ab (simulators)."""
    tmp = tmp_path_factory.mktemp("reports")
    scenario = tmp / "rep.toml"
    scenario.write_text(SCENARIO.format(duration=2.5))
    short = tmp / "short.toml"
    short.write_text(SCENARIO.format(duration=1.0).split("[faults]")[0])
    common = ["--no-tui"]
    assert main(["run", str(scenario), "--out", str(tmp / "run"), *common]) == 0
    assert main(["sweep", str(short), "--concurrency", "1,4", "--out", str(tmp / "sweep")]) == 0
    assert main(["ab", str(short), "--repeat", "1", "--out", str(tmp / "ab")]) == 0
    return {
        "run": next((tmp / "run").iterdir()),
        "sweep": next((tmp / "sweep").iterdir()),
        "ab": next((tmp / "ab").iterdir()),
    }


@pytest.mark.parametrize("kind", ["run", "sweep", "ab"])
def test_a_report_is_one_self_contained_file_with_its_plots(
    kind: str, folders: dict[str, Path]
) -> None:
    folder = folders[kind]
    assert main(["report", str(folder)]) == 0
    page = (folder / "report.html").read_text()
    # Nothing is fetched from elsewhere: every image is a data URI.
    assert not re.search(r'(src|href)="(?!data:)', page)
    assert page.count('src="data:image/png;base64,') >= 2
    pngs = sorted((folder / "plots").glob("*.png"))
    assert pngs and all(p.with_suffix(".svg").exists() for p in pngs)
    expected = {
        "run": ["Latency (ms)", "cancel-some", "SLOs", "Goodput"],
        "sweep": ["Highest concurrency meeting the SLOs", "Knee"],
        "ab": ["B - A with 95% bootstrap intervals", "Output equivalence"],
    }[kind]
    for text in expected:
        assert text in page, text


def test_the_latency_table_reads_as_a_reader_asks(folders: dict[str, Path]) -> None:
    folder = folders["run"]
    assert main(["report", str(folder)]) == 0
    page = (folder / "report.html").read_text()
    table = page.split("<h2>Latency (ms)</h2>", 1)[1].split("</table>", 1)[0]
    rows = re.findall(r"<tr><td>(\w+)</td>", table)
    # summary.json's keys are sorted: client_lag_ms and dispatch_lag_ms would come first.
    assert rows == [
        "ttft_ms",
        "ttft_ms_corrected",
        "itl_ms",
        "tpot_ms",
        "e2e_ms",
        "e2e_ms_corrected",
        "dispatch_lag_ms",
        "client_lag_ms",
    ]


def test_a_folder_that_is_none_of_them_is_a_usage_error(tmp_path: Path) -> None:
    assert main(["report", str(tmp_path)]) == 2


@pytest.mark.skipif(
    not os.path.exists(CHROMIUM) and not REQUIRE_BROWSER, reason="Chromium is not installed"
)
@pytest.mark.parametrize("kind", ["run", "sweep", "ab"])
def test_the_report_opens_in_headless_chromium_without_errors(
    kind: str, folders: dict[str, Path], tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    folder = folders[kind]
    main(["report", str(folder)])
    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto((folder / "report.html").as_uri())
            images_ok = page.evaluate(
                "Array.from(document.images).every(i => i.complete && i.naturalWidth > 0)"
            )
            n_images = page.evaluate("document.images.length")
            shot = tmp_path / f"{kind}.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert errors == []
    assert images_ok and n_images >= 2
    assert shot.stat().st_size > 20_000


def test_an_ab_of_tool_calls_draws_no_empty_tpot_plot(tmp_path: Path) -> None:
    # Answers with tool calls have no TPOT: the ab report drew an empty TPOT plot.
    scenario = tmp_path / "tools.toml"
    scenario.write_text(
        'name = "tools"\nmax_tokens = 32\n[[sources]]\nkind = "bfcl"\ncategory = "tool-calls"\n'
        'subsets = ["simple_python"]\n[load]\nconcurrency = 2\nduration_s = 1.0\nwarmup_s = 0\n'
    )
    out = tmp_path / "ab"
    assert main(["ab", str(scenario), "--repeat", "1", "--out", str(out), "--no-tui"]) == 0
    (folder,) = out.iterdir()
    assert main(["report", str(folder)]) == 0
    page = (folder / "report.html").read_text()
    plots = {p.stem for p in (folder / "plots").glob("*.png")}
    assert "ttft_ms-percentiles" in plots and "tpot_ms-percentiles" not in plots
    assert "tpot_ms: no values on either side (answers with tool calls have no TPOT)" in page
