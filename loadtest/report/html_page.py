"""The page ``loadtest report`` writes: escaping, tables, verdict marks and embedded plots.

Every section (a run's, a sweep's, a comparison's, a decision's) writes to one ``Page``,
so the page has one style and no outside reference.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from loadtest.model.verdict import SloCheck
from loadtest.report.exit_reasons import too_few
from loadtest.report.plots import save_figure

__all__ = ["Markup", "Page", "esc", "met", "table"]

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:70em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:.25em .6em;
text-align:right}th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
.bad{color:#b00;font-weight:bold}.good{color:#070}img{max-width:100%;margin:1em 0}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}code{background:#f3f3f3}
"""


class Markup(str):
    """Our own markup, put in a table cell as it is: ``esc`` escapes every other value.

    Restoring escaped marks after the fact missed every mark not on its list (a
    CANNOT TELL cell showed its ``<span>`` as text)."""

    __slots__ = ()


def esc(v: Any) -> str:
    if isinstance(v, Markup):
        return v
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.4g}"
    return html.escape(str(v))


def table(head: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><tr>{th}</tr>{body}</table>"


def met(flag: bool, untold: SloCheck | None = None, warmup: int = 0) -> Markup:
    if untold is not None:  # too few values: not met, and not missed either
        why = esc(too_few(untold, warmup))
        return Markup(f'<span class="bad">CANNOT TELL</span> ({why})')
    return Markup('<span class="good">met</span>' if flag else '<span class="bad">MISSED</span>')


class Page:
    def __init__(self, folder: Path, title: str) -> None:
        self.folder = folder
        self.parts = [f"<h1>{esc(title)}</h1>"]

    def add(self, text: str) -> None:
        self.parts.append(text)

    def plot(self, fig: Any, name: str, alt: str) -> None:
        png, _ = save_figure(fig, self.folder / "plots" / name)
        data = base64.b64encode(png.read_bytes()).decode("ascii")
        self.parts.append(f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">')

    def html(self, title: str) -> str:
        return (
            f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>{esc(title)}</title><style>{_CSS}</style></head><body>"
            + "\n".join(self.parts)
            + "</body></html>"
        )
