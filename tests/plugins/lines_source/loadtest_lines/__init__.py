"""A prompt source plugin: every non-empty line of a text file is one prompt.

It has keys of both sorts a kind may have. ``prefix`` is put before each line: an
untyped key, it reaches the plugin as written (``SourceSpec.option``). ``block_size``
cuts a longer line into prompts of that many characters: a typed key, parsed and checked
by the kind's own ``parse_keys`` into ``LinesKeys`` (``SourceSpec.own``). Its name is
also a key of loadtest's ``trace`` kind, which is no business of this one. Nothing here
is part of loadtest: it uses only the plugin interface a third party sees.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadtest.plugins import DatasetError, Prompt, SourceSpec, Table


@dataclass(frozen=True)
class LinesKeys:
    """The ``lines`` kind's typed keys."""

    block_size: int | None = None


class Lines:
    """The ``lines`` kind."""

    keys = frozenset({"path", "prefix", "limit", "block_size"})
    needs_path = True

    def parse_keys(self, table: Table, base: Path) -> LinesKeys:
        return LinesKeys(block_size=table.integer("block_size", None, minimum=1))

    def load(self, spec: SourceSpec, tokenizer: object | None) -> list[Prompt]:
        assert spec.path is not None
        try:
            text = spec.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise DatasetError(f"{spec.path}: {exc.strerror}") from exc
        prefix = str(spec.option("prefix", ""))
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
        # Another kind may load through this one (``ordered``) with keys of its own.
        size = spec.own(LinesKeys).block_size if spec.kind == "lines" else None
        if size is not None:
            lines = [ln[i : i + size] for ln in lines for i in range(0, len(ln), size)]
        if spec.limit is not None:
            lines = lines[: spec.limit]
        return [
            Prompt(
                id=f"line-{i}",
                source="lines",
                category=spec.category,
                messages=({"role": "user", "content": prefix + line},),
            )
            for i, line in enumerate(lines)
        ]


LINES = Lines()
