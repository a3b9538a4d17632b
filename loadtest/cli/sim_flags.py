"""``loadtest sim``'s flags: one per ``SimConfig`` field, its help taken from the field's
own docstring, so the flags and their explanations cannot drift apart."""

from __future__ import annotations

import argparse
import ast
import inspect
from dataclasses import fields

from loadtest.cli.parser import Parser

__all__ = ["add_sim_flags"]


def add_sim_flags(sim: Parser) -> None:
    """One flag per ``SimConfig`` field, with its explanation and default."""
    from loadtest.sim import model
    from loadtest.sim.model import SimConfig

    docs = _field_docs(inspect.getsource(model), "SimConfig")
    defaults = SimConfig()
    for f in fields(SimConfig):
        default = getattr(defaults, f.name)
        flag = f"--{f.name.replace('_', '-')}"
        text = " ".join(docs.get(f.name, "").split()).replace("%", "%%")
        help_text = f"{text} (default: {default})" if text else f"(default: {default})"
        if isinstance(default, bool):
            # A switch (--prefix-cache, --no-prefix-cache); "--prefix-cache false" still
            # reads, since sim_args writes every field with its value.
            sim.add_argument(
                flag, nargs="?", const=True, type=_flag, default=default, help=help_text
            )
            sim.add_argument(
                f"--no-{flag[2:]}", dest=f.name, action="store_false", help=argparse.SUPPRESS
            )
            continue
        sim.add_argument(flag, type=type(default), default=default, help=help_text)


def _field_docs(source: str, class_name: str) -> dict[str, str]:
    """The docstring under each annotated field of ``class_name`` in ``source``."""
    tree = ast.parse(source)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    docs: dict[str, str] = {}
    for field_node, after in zip(cls.body, cls.body[1:], strict=False):
        if (
            isinstance(field_node, ast.AnnAssign)
            and isinstance(field_node.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[field_node.target.id] = after.value.value
    return docs


def _flag(text: str) -> bool:
    if text.lower() in ("1", "true", "yes", "on"):
        return True
    if text.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
