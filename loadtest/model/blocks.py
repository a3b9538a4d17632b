"""Summary blocks as the summary model sees them: a key and a typed model, found by name.

A feature's section of summary.json (``server``, ``faults``, ``agent``, a plugin's own)
is a *block*: one object, registered under the key it takes in the entry-point group
``loadtest.blocks`` (loadtest's own in its pyproject.toml, exactly as a third party's).
The whole declaration, how a block is fed, merged over workers and printed, is
``engine.blocks.SummaryBlock``; reading and validating a summary needs only its model
(``BlockModel``), so that is all this layer asks of it. The plugin objects are loaded on
first use: the dynamic import is the plugin mechanism, not a dependency of this layer on
the ones above it (as ``config.sources`` loads the data sets' kinds).

``summary_type`` is the document every summary.json is decoded with and the published
JSON Schema is generated from: ``Summary``'s own fields, with each registered block's
model under its key. ``Summary`` still names loadtest's own blocks, for typed readers;
``summary_type`` refuses a registered model that differs from the field of the same key,
so the two cannot drift apart (and a plugin cannot take a key summary.json has). A model
may extend its field's TypedDict with fields of its own (the ``faults`` entry with each
fault kind's figures, made at run time): typed readers keep reading the field's.
"""

from __future__ import annotations

import functools
from typing import (
    Any,
    NotRequired,
    Protocol,
    Required,
    get_args,
    get_origin,
    get_type_hints,
    is_typeddict,
    runtime_checkable,
)
from typing import TypedDict as _TypedDict

from loadtest.errors import UsageError
from loadtest.model.summary import Summary
from loadtest.registry import Registry

__all__ = [
    "BLOCKS",
    "GROUP",
    "BlockModel",
    "block_model",
    "block_names",
    "extends",
    "load_block",
    "summary_type",
]

GROUP = "loadtest.blocks"
"""The entry-point group summary blocks register in (the name is the block's key)."""

# The functional form, called with a mapping made at run time (mypy takes only literals).
_make_typeddict: Any = _TypedDict


@runtime_checkable
class BlockModel(Protocol):
    """What reading a summary needs of a block."""

    @property
    def model(self) -> object:
        """The type of its value in summary.json (a TypedDict, a dataclass or msgspec
        Struct, ``list[...]``, ``X | None``): decoded and validated with it, and
        published in the JSON Schema."""
        ...

    @property
    def in_summary(self) -> bool:
        """False for a block that is a file of its own (an output renders it), not a key
        of summary.json."""
        ...


BLOCKS: Registry[BlockModel] = Registry(
    GROUP, "summary block", protocol=BlockModel, error=UsageError
)


def block_names() -> tuple[str, ...]:
    """The keys of every registered block (loadtest's and installed plugins'), sorted:
    the order the printed report shows them in."""
    return BLOCKS.names()


def load_block(name: str) -> BlockModel:
    """The block registered as ``name``; ``UsageError`` when none is, it cannot be
    loaded, or it declares no model and in_summary (each member it lacks named)."""
    return BLOCKS.load(name)


def block_model(name: str) -> BlockModel:
    """The block's model declaration (``load_block``: the registry checks it)."""
    return BLOCKS.load(name)


def _unwrapped(hint: object) -> object:
    """A field's type without its ``NotRequired`` (or ``Required``)."""
    return get_args(hint)[0] if get_origin(hint) in (NotRequired, Required) else hint


def extends(model: object, field: object) -> bool:
    """``model`` is ``field``, or the same type with a TypedDict in it that has every
    field of ``field``'s one (of the same type, required or not alike) and more."""
    if model == field:
        return True
    if is_typeddict(model) and is_typeddict(field):
        mine, theirs = _fields(model), _fields(field)
        return all(mine.get(k) == v for k, v in theirs.items())
    args = get_args(model)
    return (
        get_origin(model) is not None
        and get_origin(model) is get_origin(field)
        and len(args) == len(get_args(field))
        and all(map(extends, args, get_args(field)))
    )


def _fields(typed: object) -> dict[str, tuple[object, bool]]:
    """A TypedDict's fields: each one's type (``NotRequired`` taken off) and whether it
    is required, as msgspec reads it: the class's totality (a ``total=False`` base's
    fields carry no ``NotRequired``), then the field's own marker (Python 3.11 counts a
    string ``NotRequired[...]``, under ``from __future__ import annotations``, as
    required)."""
    required = vars(typed)["__required_keys__"]
    out = {}
    for k, h in get_type_hints(typed, include_extras=True).items():
        marked = get_origin(h)
        out[k] = (
            _unwrapped(h),
            marked is Required or (k in required and marked is not NotRequired),
        )
    return out


@functools.cache
def summary_type() -> type:
    """``Summary`` with every registered block's model under its key (not required):
    what summary.json is decoded with and its schema generated from."""
    fields = dict(get_type_hints(Summary, include_extras=True))
    for name in block_names():
        block = block_model(name)
        if not block.in_summary:
            continue
        if name in fields and not extends(block.model, _unwrapped(fields[name])):
            raise UsageError(
                f"the summary block {name!r} declares the model {block.model!r}, but "
                f"summary.json's {name!r} is {_unwrapped(fields[name])!r}: a block takes a "
                "key of its own"
            )
        fields[name] = NotRequired[block.model]
    full: type = _make_typeddict("Summary", fields)
    # The schema's title and description are the type's name and docstring.
    full.__doc__ = Summary.__doc__
    full.__module__ = Summary.__module__
    return full
