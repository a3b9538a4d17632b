"""docs/plugins.md's examples are held to the plugin package the suite runs.

Each example names its entry point in a ``toml`` block and shows the module in the
``python`` block after it. The entry point must be the test plugin package's own
(``tests/plugins/lines_source/pyproject.toml``), its module a file of that package, and
every class, function and constant the example defines a top-level name of that module,
so an example cannot name a member, a module or an object the package does not have:
the package is what ``tests/test_plugins.py`` installs and runs in one process, under
``--workers 2`` and on Ray.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "plugins.md"
PACKAGE = ROOT / "tests" / "plugins" / "lines_source"
_BLOCK = re.compile(r"```(toml|python)\n(.*?)```", re.S)


def _examples() -> list[tuple[str, str, str, str | None]]:
    """(group, name, module:attr, the python block after it or None), per entry point
    a toml block of the doc declares."""
    blocks = [(m.group(1), m.group(2)) for m in _BLOCK.finditer(DOC.read_text())]
    found = []
    for i, (lang, text) in enumerate(blocks):
        if lang != "toml" or "entry-points" not in text:
            continue
        after = blocks[i + 1][1] if i + 1 < len(blocks) and blocks[i + 1][0] == "python" else None
        for group, points in tomllib.loads(text)["project"]["entry-points"].items():
            for name, target in points.items():
                found.append((group, name, target, after))
    return found


EXAMPLES = _examples()


def _defined(tree: ast.Module) -> set[str]:
    names = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_every_kind_of_plugin_has_an_example() -> None:
    groups = {group for group, *_ in EXAMPLES}
    own = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]["entry-points"]
    assert groups == set(own), set(own) ^ groups


@pytest.mark.parametrize(("group", "name", "target", "code"), EXAMPLES, ids=lambda v: str(v)[:40])
def test_an_example_is_the_plugin_package_the_suite_runs(
    group: str, name: str, target: str, code: str | None
) -> None:
    own = tomllib.loads((PACKAGE / "pyproject.toml").read_text())["project"]["entry-points"]
    assert own.get(group, {}).get(name) == target, (group, name, target)
    module, attr = target.split(":")
    parts = module.split(".")
    path = PACKAGE.joinpath(*parts).with_suffix(".py")
    if not path.exists():
        path = PACKAGE.joinpath(*parts, "__init__.py")
    real = _defined(ast.parse(path.read_text()))
    assert attr in real, f"{path.name} has no {attr}"
    if code is None:
        return
    shown = _defined(ast.parse(code))  # an example is Python as written (``...`` too)
    if attr in shown:  # the example of this entry point's module
        assert shown <= real, f"{path.name} lacks {sorted(shown - real)}"
