"""Which files of a run folder hold its request record.

A finished run has one ``requests.jsonl``; a ``--workers`` run killed before its merge
has only its workers' own, in ``worker-<i>/``. Every reader of a run's lines (the
rebuild, compare, export-trace) asks here, so none reads a partial merge or misses a
worker's share.
"""

from __future__ import annotations

from pathlib import Path

from loadtest.model.io import JsonLines, run_requests

__all__ = ["line_files", "record_parts", "run_lines"]


def run_lines(folder: Path) -> list[tuple[JsonLines, int | None]]:
    """``line_files`` opened: the merged file checked against the summary's count of
    requests (``run_requests``: a file cut after the run is named, not read in part),
    the workers' own as they are (their run was killed; nothing counted them)."""
    return [
        (run_requests(folder) if worker is None else JsonLines(path), worker)
        for path, worker in line_files(folder)
    ]


def line_files(folder: Path) -> list[tuple[Path, int | None]]:
    """The requests.jsonl files that are the run's record, each with the worker whose
    untagged lines it holds (None: the run's own, tagged where it had workers): the
    run's merged file once it wrote its summary, else (a --workers run killed before
    its merge) its workers' own, as ``rebuild_summary`` reads them."""
    merged = folder / "requests.jsonl"
    parts = record_parts(folder)
    finished = (folder / "summary.json").exists() and merged.exists()
    if finished or parts in ([], [folder]):
        return [(merged, None)]
    return [(p / "requests.jsonl", _worker_index(p)) for p in parts]


def record_parts(folder: Path) -> list[Path]:
    """The folders whose requests.jsonl hold a run's lines: its workers' where it had
    them and was killed before its merge, else its own (none: no lines at all)."""
    # A --workers run merges its workers' files only at its end: a killed one has them
    # in worker-<i>/, which are the record then (a merge cut short would be partial).
    workers = sorted(
        (p for p in folder.glob("worker-*") if (p / "requests.jsonl").exists()),
        key=_worker_index,
    )
    if workers:
        return workers
    return [folder] if (folder / "requests.jsonl").exists() else []


def _worker_index(path: Path) -> int:
    index = path.name.removeprefix("worker-")
    return int(index) if index.isdigit() else -1
