"""Names of a module imported on first use (PEP 562), for the public modules.

``import loadtest`` (every command and simulator process does it) and ``import
loadtest.plugins`` (every plugin does) must not pay for the runner's, the report's or
the simulator's imports; each public name is looked up in its home module when first
read, then kept as a plain attribute.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_names"]


def lazy_names(
    module: str, homes: Mapping[str, str], public: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``module``, whose names live in ``homes``."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[module], name, value)  # the next read is a plain attribute
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[module])) | set(public))

    return __getattr__, __dir__
