"""The docs keep up with the code: every command and flag, the README's size, its links.

The flags are read from ``--help`` itself (what a user sees), so a flag added anywhere
in the CLI fails here until a page in docs/ says what it does.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

from loadtest.cli import main
from loadtest.datasets.bfcl import BFCL_FETCH, BFCL_PIN

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
README_LIMIT = 8 * 1024

_GENERATED_ELSEWHERE = {ROOT / "docs" / "summary.schema.json"}
"""Link targets another branch generates (the summary schema, from the typed model).

Once that branch is merged the file exists and is checked like any other; the
integrator removes this set then.
"""


def _help(*argv: str) -> str:
    out = io.StringIO()
    # Help text wraps at the terminal's width; a fixed width keeps the test independent
    # of where it runs.
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
            main([*argv, "--help"])
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    assert exited.value.code == 0
    return out.getvalue()


def _subcommands() -> list[str]:
    match = re.search(r"\{([a-z,-]+)\}", _help())
    assert match, "loadtest --help lists no sub-commands"
    return match.group(1).split(",")


def _flags(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)) - {"--help"}


def _docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in [README, *DOCS])


def _mentioned(flag: str, text: str) -> bool:
    # --rate must not count as mentioned because --rates is.
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


def test_docs_mention_every_subcommand_and_flag() -> None:
    text = _docs_text()
    missing: list[str] = []
    top = _help()
    missing += [f"loadtest {f}" for f in sorted(_flags(top)) if not _mentioned(f, text)]
    for sub in _subcommands():
        if f"loadtest {sub}" not in text:
            missing.append(f"loadtest {sub} (the command)")
        flags = _flags(_help(sub))
        missing += [f"loadtest {sub} {f}" for f in sorted(flags) if not _mentioned(f, text)]
    assert not missing, "not mentioned in README.md or docs/*.md:\n" + "\n".join(missing)


def test_readme_is_short() -> None:
    size = len(README.read_bytes())
    assert size < README_LIMIT, f"README.md is {size} bytes; the front door stays under 8 KB"


_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def test_relative_links_resolve() -> None:
    broken: list[str] = []
    for page in [README, *DOCS]:
        for target in _LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue  # a URL or an anchor on the same page
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if not path.exists() and path not in _GENERATED_ELSEWHERE:
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert not broken, "links to files that do not exist:\n" + "\n".join(broken)


def _code_block_after(text: str, heading: str) -> str:
    section = text.split(heading, 1)[1]
    match = re.search(r"```sh\n(.*?)\n```", section, re.S)
    assert match, f"no sh block under {heading!r}"
    return match.group(1).strip()


def test_ci_runs_the_readme_test_command_as_written() -> None:
    readme_cmd = _code_block_after(README.read_text(encoding="utf-8"), "## Test it")
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    marker = ci_lines.index("# --- README: test ---")
    assert ci_lines[marker + 1].strip() == readme_cmd
    script = ROOT / readme_cmd.split()[0]
    assert script.is_file() and os.access(script, os.X_OK), f"{script} is not executable"


def test_readme_run_command_installs_only_what_running_needs() -> None:
    run_cmd = _code_block_after(README.read_text(encoding="utf-8"), "## Run it")
    assert "pip install -e . " in run_cmd, run_cmd
    # No extras: a first run needs neither the model, nor Ray, nor the dev tools.
    assert "[" not in run_cmd, run_cmd
    assert run_cmd.endswith("loadtest run"), run_cmd


def test_the_bfcl_release_is_named_once_for_readme_ci_and_errors() -> None:
    run_cmd = _code_block_after(README.read_text(encoding="utf-8"), "## Run it")
    test_sh = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    # The missing-data error's command is the README's download, word for word.
    assert BFCL_FETCH in run_cmd and BFCL_FETCH in test_sh
    assert f"'{BFCL_PIN}'" in BFCL_FETCH


def test_the_simulator_page_has_every_setting_with_its_default() -> None:
    from dataclasses import fields

    from loadtest.sim import SimConfig

    table = (ROOT / "docs" / "simulator.md").read_text().split("## Every setting", 1)[1]
    rows = {
        m.group(1): m.group(2).strip()
        for m in re.finditer(r"^\| `--([a-z0-9-]+)` \| ([^|]*) \|", table, re.MULTILINE)
    }
    missing = [f.name for f in fields(SimConfig) if f.name.replace("_", "-") not in rows]
    assert not missing, f"docs/simulator.md's settings table lacks {missing}"
    for f in fields(SimConfig):
        written, default = rows[f.name.replace("_", "-")], f.default
        if isinstance(default, bool):
            assert written in ("on", "off", "true", "false"), (f.name, written)
            assert (written in ("on", "true")) == default, (f.name, written)
        elif isinstance(default, int | float):
            assert float(written) == float(default), (f.name, written, default)


_OPEN_ENDED = re.compile(r"\.\.\.\s*$|\[and the [^]]*flags of run\]", re.M)
"""A synopsis that sends the reader to ``--help`` or to ``run`` for the rest."""


def _synopses() -> dict[str, str]:
    """docs/cli.md's synopsis block: each command's line and its continuation lines."""
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    block = page.split("```", 2)[1]
    out: dict[str, str] = {}
    name = ""
    for line in block.splitlines():
        if line.startswith("loadtest "):
            name = line.split()[1]
            out[name] = out.get(name, "") + line + "\n"
        elif line.startswith(" ") and name:
            out[name] += line + "\n"
    return out


def test_the_cli_synopsis_has_every_command_and_each_flags_choices_as_parsed() -> None:
    """docs/cli.md's synopsis said ``serve-llama --spec none|ngram`` after draft and self
    were added, left out four ``--draft*`` flags and the whole of export-trace: a
    synopsis is checked against the parser, flag by flag and choice by choice."""
    synopses = _synopses()
    wrong: list[str] = []
    for sub in _subcommands():
        if sub not in synopses:
            wrong.append(f"loadtest {sub}: no line in the synopsis")
            continue
        text, usage = synopses[sub], _help(sub)
        for flag, choices in set(re.findall(r"(--[a-z][a-z0-9-]*) \{([^}]+)\}", usage)):
            written = re.search(rf"{re.escape(flag)} ([a-z0-9-]+(?:\|[a-z0-9-]+)+)", text)
            if written and set(written.group(1).split("|")) != set(choices.split(",")):
                wrong.append(f"loadtest {sub} {flag}: {written.group(1)} for {choices}")
        if _OPEN_ENDED.search(text):
            continue  # the rest is in --help or in run's line, said so
        flags = _flags(usage.split("\n\n", 1)[0])
        wrong += [f"loadtest {sub} {f}: not in its synopsis" for f in sorted(flags)
                  if not _mentioned(f, text)]  # fmt: skip
    assert not wrong, "docs/cli.md's synopsis:\n" + "\n".join(wrong)
