"""The scenarios shipped inside the package, found by name from any install.

They are package data (``loadtest/scenarios/*.toml``, with the files they replay under
``loadtest/scenarios/data/``), read through ``importlib.resources`` so that a wheel
installed outside any checkout finds them as a source checkout does. A checkout's
top-level ``scenarios/`` is a link to the same folder, so the paths in the docs work
there too.
"""

from __future__ import annotations

import shutil
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from loadtest.errors import ScenarioError, UsageError

__all__ = [
    "ShippedScenario",
    "copy_shipped",
    "find_shipped",
    "resolve_scenario_path",
    "shipped_dir",
    "shipped_scenarios",
]


@dataclass(frozen=True, slots=True)
class ShippedScenario:
    """One shipped scenario: its name, its file and its one-line description."""

    name: str
    path: Path
    description: str


def shipped_dir() -> Path:
    """The folder of the shipped scenarios inside the installed package."""
    folder = resources.files("loadtest").joinpath("scenarios")
    # Wheels install unpacked, so this is a real folder; a zipped import (zipapp,
    # egg) would need extracting, which loadtest does not support.
    if not isinstance(folder, Path):
        raise UsageError(f"the shipped scenarios are not a folder on disk ({folder})")
    return folder


def _description(path: Path) -> str:
    try:
        data = tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return "(unreadable)"
    text = data.get("description", "")
    return " ".join(text.split()) if isinstance(text, str) else ""


def shipped_scenarios() -> list[ShippedScenario]:
    """Every shipped scenario, by name."""
    return [
        ShippedScenario(p.stem, p, _description(p)) for p in sorted(shipped_dir().glob("*.toml"))
    ]


def find_shipped(name: str) -> Path | None:
    """The shipped scenario called ``name`` (with or without ``.toml``), or None."""
    stem = name.removesuffix(".toml")
    if not stem or "/" in stem or "\\" in stem:
        return None
    path = shipped_dir() / f"{stem}.toml"
    return path if path.is_file() else None


def _names() -> str:
    return ", ".join(s.name for s in shipped_scenarios())


def resolve_scenario_path(given: str | None) -> Path:
    """The TOML a ``scenario`` argument names: a path, or a shipped scenario's name.

    A file that exists wins. A bare name (no folder) is looked up in ``./scenarios``,
    then among the shipped ones. A path into a ``scenarios/`` folder that is not here
    (the docs' ``scenarios/code.toml`` typed outside a checkout) falls back to the
    shipped scenario of that name; a name found nowhere is an error that lists the names.
    """
    given = "mixed" if given is None else given
    path = Path(given)
    if path.is_file():
        return path
    bare = path.parent == Path(".")
    if bare or path.parent.name == "scenarios":
        name = path.name if path.suffix == ".toml" else f"{path.name}.toml"
        local = Path("scenarios") / name
        if bare and local.is_file():
            return local
        shipped = find_shipped(name)
        if shipped is not None:
            return shipped
        what = "no such scenario file, nor a shipped scenario of that name"
        raise ScenarioError(given, "", f"{what}; shipped: {_names()} (loadtest scenarios)")
    return path  # a path of the user's: reading it says what is wrong


def _data_files(scenario: Path) -> list[str]:
    """The relative ``path`` values of a scenario's sources and tasks (files it reads)."""
    data = tomllib.loads(scenario.read_text("utf-8"))
    found = []
    for table in ("sources", "tasks"):
        for entry in data.get(table, []):
            value = entry.get("path") if isinstance(entry, dict) else None
            if isinstance(value, str) and not Path(value).is_absolute():
                found.append(value)
    return found


def copy_shipped(name: str, dest: Path | None, force: bool = False) -> list[Path]:
    """Write a shipped scenario to ``dest`` (default ``./NAME.toml``) to edit.

    The files it replays are copied beside it at the same relative paths, so the copy
    runs as it is. Returns the files written; refuses to overwrite without ``force``.
    """
    source = find_shipped(name)
    if source is None:
        raise UsageError(f"init: {name!r} is not a shipped scenario; shipped: {_names()}")
    if dest is None:
        dest = Path(f"{source.stem}.toml")
    elif dest.is_dir():
        dest = dest / f"{source.stem}.toml"
    pairs = [(source, dest)]
    pairs += [(source.parent / rel, dest.parent / rel) for rel in _data_files(source)]
    if not force:
        taken = [str(d) for _, d in pairs if d.exists()]
        if taken:
            raise UsageError(f"init: {', '.join(taken)} already exists (--force overwrites)")
    for src, dst in pairs:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    return [d for _, d in pairs]
