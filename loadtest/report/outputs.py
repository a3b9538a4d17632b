"""Output files as plugins: one object per file a finished run writes, found by name.

An output declares the file it writes (``name``; a pattern such as ``*.hgrm`` for a
family of files), what it is made from (``made_from``: fields of ``RunResults``) and
how its bytes are rendered from them (``render``). It never opens a file: the run
writes every registered output, each file through the one atomic writer
(``model.atomic.write_atomic``), so a killed run leaves whole files or none.

loadtest's own outputs (summary.json, summary.csv, the .hgrm tables: ``report.export``;
a feature's block that is a file of its own, ``multiturn.json`` and ``workload.json``:
the ``BlockFile``s below) are registered exactly as a third party's are, as entry
points in the group ``loadtest.outputs`` (loadtest's in its pyproject.toml;
``_compat.plugins``), so adding
one edits no list here or in the run.

summary.json is written last whatever else is installed: its presence means the run's
files are complete (``loadtest summarize`` rebuilds a folder without one).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Protocol, runtime_checkable

import orjson

from loadtest.errors import UsageError
from loadtest.measure.recorders import Metrics
from loadtest.model.atomic import write_atomic
from loadtest.model.summary import Summary
from loadtest.registry import Registry

__all__ = [
    "COMPLETE",
    "GROUP",
    "OUTPUTS",
    "OutputFile",
    "RunResults",
    "check_output",
    "output_names",
    "output_plugin",
    "rendered",
    "write_outputs",
]

GROUP = "loadtest.outputs"
"""The entry-point group output files register in."""

COMPLETE = "summary"
"""The output written after every other one: the marker of a complete run folder."""


@dataclass(frozen=True, slots=True)
class RunResults:
    """What an output file is made from: the summary, the metrics behind it (the run's
    histograms; rebuilt from the files by ``loadtest summarize``) and the run's merged
    summary blocks (``engine.blocks``), those that are files of their own too."""

    summary: Summary
    metrics: Metrics
    blocks: Mapping[str, object] = field(default_factory=dict)
    """Every block the run had, merged, by name (none in a summary rebuilt after a kill:
    only the living run had them)."""


_PARTS = frozenset(f.name for f in fields(RunResults))


@runtime_checkable
class OutputFile(Protocol):
    """What an output file declares (an object, registered under a name of its own)."""

    @property
    def name(self) -> str:
        """The file it writes, in the run's folder (``*.x``: a family of files)."""
        ...

    @property
    def made_from(self) -> frozenset[str]:
        """The fields of ``RunResults`` it reads (``summary``, ``metrics``)."""
        ...

    def render(self, results: RunResults) -> Iterable[tuple[str, bytes | str]]:
        """Each file's name (no folder) and contents; none: nothing to write here."""
        ...


def output_names() -> tuple[str, ...]:
    """The names of every registered output (loadtest's and installed plugins'),
    sorted, ``COMPLETE`` last: the order the run writes them in."""
    return _in_order(OUTPUTS.names())


def _in_order(names: Iterable[str]) -> tuple[str, ...]:
    """Sorted, ``COMPLETE`` last."""
    s = set(names)
    return tuple(sorted(s - {COMPLETE})) + ((COMPLETE,) if COMPLETE in s else ())


def output_plugin(name: str) -> OutputFile:
    """The output registered as ``name``; ``UsageError`` when none is, it cannot be
    loaded, or it declares no output (``check_output``)."""
    return OUTPUTS.load(name)


def check_output(label: str, plugin: object) -> OutputFile:
    """``plugin`` as an ``OutputFile`` made from parts a run has; ``UsageError`` naming
    it (``label``) otherwise."""
    if not isinstance(plugin, OutputFile):
        raise UsageError(
            f"the output plugin {label} declares no name, made_from and render: see docs/plugins.md"
        )
    wrong = _unknown_parts(plugin)
    if wrong:
        raise UsageError(f"the output plugin {label} {wrong}")
    return plugin


def _unknown_parts(plugin: object) -> str | None:
    """Why an output is made from something a run's results do not have, or None."""
    unknown = set(getattr(plugin, "made_from", ())) - _PARTS
    if not unknown:
        return None
    return (
        f"is made from {', '.join(sorted(unknown))}: a run's results are "
        f"{', '.join(sorted(_PARTS))}"
    )


OUTPUTS: Registry[OutputFile] = Registry(
    GROUP, "output", protocol=OutputFile, check=_unknown_parts, error=UsageError
)


def rendered(
    name: str, plugin: OutputFile, results: RunResults, run_dir: Path
) -> list[tuple[Path, bytes | str]]:
    """Every file of one output, rendered whole (before any is written: a failure leaves
    none of them), each in ``run_dir`` under a plain name that its declared ``name``
    matches; ``UsageError`` naming the output when one does not."""
    files = []
    for file, data in plugin.render(results):
        if not file or file != Path(file).name or file in (".", ".."):
            raise UsageError(f"the output {name!r} names the file {file!r}: give a plain name")
        if not fnmatchcase(file, plugin.name):
            raise UsageError(
                f"the output {name!r} names the file {file!r}, not what it declares: "
                f"{plugin.name!r}"
            )
        files.append((run_dir / file, data))
    return files


def write_outputs(
    run_dir: Path,
    summary: Summary,
    metrics: Metrics,
    given: Mapping[str, OutputFile] | None = None,
    blocks: Mapping[str, object] | None = None,
) -> list[Path]:
    """Write every registered output of a finished run (``given``: these instead) into
    ``run_dir``, beside its ``requests.jsonl`` and ``histograms.hlog``, each file
    atomically, summary.json last; returns the files written, in order.

    Every output is rendered before any file is written. One that cannot be loaded or
    rendered, or names a file another output names too, writes none of its files; the
    others are written, summary.json is not (the folder is not complete), and
    ``UsageError`` names each that failed: ``loadtest summarize`` writes them once fixed.
    """
    results = RunResults(summary=summary, metrics=metrics, blocks=blocks or {})
    done: list[tuple[str, list[tuple[Path, bytes | str]]]] = []
    failed: list[str] = []
    for name in output_names() if given is None else _in_order(given):
        try:
            plugin = output_plugin(name) if given is None else given[name]
            done.append((name, rendered(name, plugin, results, run_dir)))
        except UsageError as exc:
            failed.append(str(exc))
        except Exception as exc:  # a plugin's own bug: named, the rest still written
            failed.append(f"the output {name!r} failed: {type(exc).__name__}: {exc}")
    # One output's file would silently replace another's (or mark the folder complete).
    owners: dict[str, list[str]] = {}
    for name, files in done:
        for path, _ in files:
            owners.setdefault(path.name, []).append(name)
    clashed = set()
    for file, names in sorted(owners.items()):
        if len(names) > 1:
            clashed.update(names)
            failed.append(f"{file} is named by the outputs {', '.join(map(repr, names))}")
    written: list[Path] = []
    for name, files in done:
        if name in clashed or (name == COMPLETE and failed):
            continue
        written += [write_atomic(path, data) for path, data in files]
    if failed:
        raise UsageError(
            f"{run_dir}: summary.json not written, as "
            + "; ".join(failed)
            + f" (fixed, `loadtest summarize {run_dir}` writes them)"
        )
    return written


@dataclass(frozen=True, slots=True)
class BlockFile:
    """An output plugin (``report.outputs``): a block that is a file of its own, written
    where the run had the block, indented as its feature always wrote it."""

    block: str
    name: str
    made_from: frozenset[str] = frozenset({"blocks"})

    def render(self, results: RunResults) -> Iterator[tuple[str, bytes]]:
        if self.block in results.blocks:
            yield self.name, orjson.dumps(results.blocks[self.block], option=orjson.OPT_INDENT_2)


MULTITURN_FILE = BlockFile("multiturn", "multiturn.json")
WORKLOAD_FILE = BlockFile("workload", "workload.json")
