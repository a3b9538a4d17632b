"""A fault kind's own figures, typed, in one of two places of its window's entry.

At its top (``top_figures``): a TypedDict of the kind's, declared as its
``figures_model``; the ``faults`` entry's type has every registered kind's
(``entry.fault_entry``), so they are in summary.json's schema and checked when it is
read back. loadtest's own kinds keep theirs there (a cancel window's
``injected_cancels``). What the rig sees of a kind's window goes the same way: a
TypedDict of the kind's, its ``observed_model``, written into ``Observed`` as the rig
plays the window (``top_observed``), copied to the top of the entry, and read there
through ``top_figures``.

In ``detail`` (``put_figures``, ``figures_of``): a frozen dataclass of the kind's,
written into ``detail`` (of ``Observed`` as the rig played it, or of the ``faults``
entry) and read back as the same class. ``detail`` is what summary.json keeps of a kind
loadtest does not know (its schema says a JSON object), so it survives a reading where
the kind is not installed; reading it back through its class checks each figure's type
where a hand-written ``detail.get(...)`` took whatever was there (msgspec names the
field that is wrong).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar, cast

import msgspec

from loadtest.errors import ResultFileError
from loadtest.model.json import JsonObject
from loadtest.model.verdict import FaultVerdict, Observed

__all__ = ["figures_of", "put_figures", "top_figures", "top_observed"]

F = TypeVar("F")
M = TypeVar("M", bound=Mapping[str, object])


def top_figures(entry: FaultVerdict, model: type[M]) -> M:
    """``entry`` as the kind's ``model`` (the TypedDict it declares as ``figures_model``):
    the same dict, so a figure set on it is set on the entry, and one it lacks (an
    entry of another kind, or written before the kind had it) is absent."""
    # The one cast for every kind: FaultVerdict cannot name the figures a kind adds (the
    # kinds sit above it); the entry's type at run time has them, and checks them when
    # summary.json is read back.
    return cast(M, entry)


def top_observed(obs: Observed, model: type[M]) -> M:
    """``obs`` as the kind's ``model`` (the TypedDict it declares as ``observed_model``):
    the same dict, so a key the kind's ``inject`` sets on it is in ``Observed``, and from
    there in the window's entry."""
    # The one cast for every kind's observations, as in top_figures: Observed names only
    # what every kind may set; the judge copies a kind's own keys into the entry, whose
    # type at run time has them.
    return cast(M, obs)


def put_figures(into: FaultVerdict | Observed, figures: object) -> None:
    """Add ``figures`` (a dataclass instance) to ``into``'s ``detail``, over what it held."""
    made = msgspec.to_builtins(figures)
    if not isinstance(made, dict):
        raise TypeError(f"fault figures are a dataclass, not {type(figures).__name__}")
    detail: JsonObject = {**into.get("detail", {}), **made}
    into["detail"] = detail


def figures_of(source: FaultVerdict | Observed, cls: type[F]) -> F | None:
    """``source``'s figures as ``cls``, None where it has no ``detail`` (a window not
    reached, a summary from before the kind wrote them); ``ResultFileError`` naming the
    field when one is missing or of another type."""
    detail = source.get("detail")
    if detail is None:
        return None
    try:
        return msgspec.convert(detail, cls)
    except msgspec.ValidationError as exc:
        where = cast(Mapping[str, object], source).get("name", "a fault window")
        raise ResultFileError(f"faults {where}: detail is not {cls.__name__}: {exc}") from None
