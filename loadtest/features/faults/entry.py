"""The type of one ``faults`` entry of summary.json: ``FaultVerdict`` with every
registered kind's own figures at its top level.

A kind declares its figures in its own module, as a TypedDict named on the kind
(``figures_model``: a cancel window's ``injected_cancels``), writes and reads them
through ``own_figures.top_figures``, and says which of them the table prints
(``printed_figures``); nothing in ``model/verdict.py`` names them. What the rig saw of
its windows it declares the same way (``observed_model``: a cancel window's
``settled_s``), written into ``Observed`` through ``own_figures.top_observed`` and copied
into the entry (``observed_keys``): those are figures of the entry like the others. The
``faults`` block's model is a list of this type, so summary.json is decoded with it (a
figure of the wrong type is named when a summary is read back) and the published schema
lists each kind's figures as ``FaultVerdict``'s own, under that name and with its
docstring. ``Observed`` itself is never decoded: the rig's windows reach the judge in
its process, and the dashboard's as the same dicts, pickled.

A figure is in no entry of another kind, so each is optional here, whatever its kind
declares. A summary read where a kind is not installed (a plugin's) loses that kind's
figures: msgspec keeps only the fields a TypedDict declares. A plugin's figures are
safer in ``detail`` (``put_figures``), which keeps whatever it holds.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any, NotRequired, Required, get_args, get_origin, get_type_hints, is_typeddict
from typing import TypedDict as _TypedDict

from loadtest.errors import UsageError
from loadtest.features.faults.kind import FaultKind, fault_kind
from loadtest.features.faults.registry import fault_kinds
from loadtest.model.verdict import FaultVerdict, RigObserved

__all__ = [
    "entry_type",
    "fault_entry",
    "figures_model",
    "observed_keys",
    "observed_model",
    "printed_figures",
    "printed_keys",
]

# The functional form, called with a mapping made at run time (mypy takes only literals).
_make_typeddict: Any = _TypedDict

log = logging.getLogger(__name__)


def figures_model(name: str, kind: object) -> type | None:
    """The TypedDict of the figures the kind ``name`` sets at the top of its entry, or
    None. Read with a default: a kind written before the attribute (one that is no
    ``FaultKindBase``) still loads."""
    return _declared(name, kind, "figures_model", "the figures at the top of its faults entry")


def observed_model(name: str, kind: object) -> type | None:
    """The TypedDict of what the rig saw of the kind ``name``'s windows (set in
    ``Observed``, copied to the top of its entry), or None; read as ``figures_model``."""
    return _declared(name, kind, "observed_model", "what its inject sets in Observed")


def _declared(name: str, kind: object, attr: str, what: str) -> type | None:
    model = getattr(kind, attr, None)
    if model is not None and not is_typeddict(model):
        raise UsageError(
            f"the fault kind {name!r} declares {attr} {model!r}: a TypedDict of {what}, "
            "or None: see docs/plugins.md"
        )
    return model


def served_as(kind: object, entry: FaultVerdict) -> str:
    """How the endpoint served through a held window of ``kind`` (``served_as``), or
    "kept serving" where the kind does not say."""
    said = getattr(kind, "served_as", None)
    words = said(entry) if callable(said) else None
    return words if isinstance(words, str) and words else "kept serving"


def printed_figures(kind: object) -> tuple[str, ...]:
    """The keys of the kind's entry the table prints, in order (none by default)."""
    return tuple(getattr(kind, "printed_figures", ()))


def entry_type(models: Sequence[tuple[str, type]]) -> type:
    """``FaultVerdict`` with each ``(kind, figures model)``'s figures, each optional;
    ``UsageError`` naming the kind when a figure is a field every entry has, or two kinds
    declare one name with two types (kinds of one class share theirs)."""
    fields: dict[str, object] = {}
    optional = vars(FaultVerdict)["__optional_keys__"]
    for key, hint in get_type_hints(FaultVerdict, include_extras=True).items():
        # A total=False base's keys carry no NotRequired: the functional form needs it.
        wrapped = key in optional and get_origin(hint) is not NotRequired
        fields[key] = NotRequired[hint] if wrapped else hint
    owner: dict[str, str] = {}
    for kind, model in models:
        for key, hint in get_type_hints(model, include_extras=True).items():
            bare = get_args(hint)[0] if get_origin(hint) in (NotRequired, Required) else hint
            figure = NotRequired[bare]
            if key in fields and key not in owner:
                raise UsageError(
                    f"the fault kind {kind!r} declares the figure {key!r}, a field every "
                    "faults entry has: name it otherwise"
                )
            if key in owner and fields[key] != figure:
                raise UsageError(
                    f"the fault kinds {owner[key]!r} and {kind!r} declare the figure {key!r} "
                    f"as {fields[key]!r} and {figure!r}: name one otherwise"
                )
            fields[key] = figure
            owner.setdefault(key, kind)
    made: type = _make_typeddict("FaultVerdict", fields)
    # The schema's title and description are the type's name and docstring: the same
    # as when the model named every kind's figures.
    made.__doc__ = FaultVerdict.__doc__
    made.__module__ = FaultVerdict.__module__
    return made


@functools.cache
def _loaded_kinds() -> tuple[tuple[str, FaultKind], ...]:
    """Every registered kind that loads, by name. One that does not is left out with a
    warning: a broken plugin kind fails the run whose plan names it (``fault_kind``), but
    must not stop every summary from being read, written or printed."""
    loaded = []
    for name in fault_kinds():
        try:
            loaded.append((name, fault_kind(name)))
        except UsageError as exc:
            log.warning("fault kind %s left out of the faults entries: %s", name, exc)
    return tuple(loaded)


@functools.cache
def fault_entry() -> type:
    """The entry with every registered kind's figures and observations (loaded once, by
    name)."""
    models = []
    for name, kind in _loaded_kinds():
        for model in (figures_model(name, kind), observed_model(name, kind)):
            if model is not None:
                models.append((name, model))
    return entry_type(models)


@functools.cache
def observed_keys() -> frozenset[str]:
    """The keys of ``Observed`` that go into the window's entry as they are: those every
    kind may set (``RigObserved``), a plugin's ``detail``, and every registered kind's
    ``observed_model`` (the entry's type has room for each; not a window's planned edges,
    which the entry has measured, nor ``not_reached``, which becomes its verdict)."""
    fault_entry()  # first: a kind's key named like a field every entry has is refused there
    own = (
        key
        for name, kind in _loaded_kinds()
        if (model := observed_model(name, kind)) is not None
        for key in get_type_hints(model)
    )
    return frozenset({*RigObserved.__optional_keys__, "detail", *own})


@functools.cache
def printed_keys() -> tuple[str, ...]:
    """Every registered kind's printed figures, in the kinds' order, each once: an entry
    has only its own kind's, so each entry's come in its kind's order."""
    keys = (k for _, kind in _loaded_kinds() for k in printed_figures(kind))
    return tuple(dict.fromkeys(keys))
