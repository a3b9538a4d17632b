"""A fault kind's own figures, typed: a frozen dataclass of the kind's, written into its
window's ``detail`` (of ``Observed`` as the rig played it, or of the ``faults`` entry)
and read back as the same class.

``detail`` is what summary.json keeps of a kind loadtest does not know (its schema says
a JSON object), so a plugin's figures need no field in ``model/verdict.py``; reading them
back through their class checks each one's type where a hand-written ``detail.get(...)``
took whatever was there (msgspec names the field that is wrong).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar, cast

import msgspec

from loadtest.errors import ResultFileError
from loadtest.model.json import JsonObject
from loadtest.model.verdict import FaultVerdict, Observed

__all__ = ["figures_of", "put_figures"]

F = TypeVar("F")


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
