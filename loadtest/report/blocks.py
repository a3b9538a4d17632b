"""The printed sections of a summary's blocks (each block's ``render``; the blocks
themselves are declared below the features, in ``engine.blocks``)."""

from __future__ import annotations

from collections.abc import Mapping

from loadtest.engine.blocks import block_plugin
from loadtest.model.blocks import block_names
from loadtest.model.summary import Summary

__all__ = ["render_blocks"]


def render_blocks(summary: Summary) -> list[str]:
    """The printed sections of the summary's blocks, in the order of their names."""
    body: Mapping[str, object] = summary
    out = []
    for name in block_names():
        plugin = block_plugin(name)
        if plugin.in_summary and name in body:
            text = plugin.render(body[name], summary)
            if text:
                out.append(text)
    return out
