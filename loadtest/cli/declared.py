"""argparse arguments made from the flags declared on an options dataclass, and the
options read back from the parsed namespace by field name (``loadtest.flag``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeVar

from loadtest.flag import Flag, declared_flags

__all__ = ["add_declared", "read_declared"]

T = TypeVar("T")


def add_declared(p: argparse.ArgumentParser, options: type, scope: str | None = None) -> None:
    """An argument for each field of ``options`` whose flag is of ``scope`` (None: every
    declared field: a command that takes all of its options' flags), in order."""
    groups: dict[str, argparse._ArgumentGroup] = {}
    exclusive: dict[str, argparse._MutuallyExclusiveGroup] = {}
    for f, declared in declared_flags(options):
        if scope is not None and declared.scope != scope:
            continue
        where: argparse._ActionsContainer = p
        if declared.group:
            if declared.group not in groups:
                groups[declared.group] = p.add_argument_group(declared.group)
            where = groups[declared.group]
        if declared.exclusive:
            if declared.exclusive not in exclusive:
                exclusive[declared.exclusive] = where.add_mutually_exclusive_group()
            where = exclusive[declared.exclusive]
        _add(where, f.name, declared, f.default)


def _add(where: argparse._ActionsContainer, dest: str, declared: Flag, default: object) -> None:
    """The argument of one declared flag."""
    _check_default(dest, declared, default)
    name, text = declared.flag_name(dest), declared.help
    if not name.startswith("-"):
        where.add_argument(name, nargs="?", help=text)
    elif declared.switch or declared.negated:
        action = "store_true" if declared.switch else "store_false"
        where.add_argument(name, dest=dest, action=action, help=text)
    elif declared.repeated:
        where.add_argument(
            name, dest=dest, action="append", default=[], metavar=declared.metavar, help=text
        )
    else:
        shown = default if declared.shown_default is None else declared.shown_default
        where.add_argument(
            name,
            dest=dest,
            type=declared.kind or str,
            choices=declared.choices or None,
            default=shown,
            metavar=declared.metavar,
            help=text,
        )


def _check_default(dest: str, declared: Flag, default: object) -> None:
    """A flag whose absence argparse fills in itself (a switch False, a negated switch
    True, a repeated flag empty, a choice its shown default) must agree with its field's
    default, or a command given no flag would read other options than a Python caller
    gets: a declaration error, raised when the parser is built."""
    expected: object = default
    if declared.switch:
        expected = False
    elif declared.negated:
        expected = True
    elif declared.repeated:
        expected = ()
    if expected != default:
        raise TypeError(
            f"the flag of {dest!r} reads {expected!r} when absent; its field: {default!r}"
        )
    shown = declared.shown_default
    if declared.choices and shown is not None and shown not in declared.choices:
        raise TypeError(f"the flag of {dest!r} shows {shown!r}, not one of its choices")


def read_declared(args: argparse.Namespace, options: type[T]) -> T:
    """``options`` made from the values ``args`` has of its declared fields; the fields
    whose flags this command has not take their defaults."""
    values: dict[str, object] = {}
    for f, declared in declared_flags(options):
        if not hasattr(args, f.name):
            continue  # a flag of another scope, not on this command
        value = getattr(args, f.name)
        if declared.repeated:
            split = declared.split
            value = tuple(p for text in value for p in (text.split(split) if split else [text]))
        elif declared.read is not None:
            value = declared.read(value)
        values[f.name] = value
    make: Callable[..., T] = options
    return make(**values)
