"""A prompt source plugin: every non-empty line of a text file is one prompt.

Its own key, ``prefix``, is put before each line (it reaches the plugin through
``SourceSpec.option``). Nothing here is part of loadtest: it uses only the plugin
interface a third party sees.
"""

from __future__ import annotations

from loadtest.plugins import DatasetError, Prompt, SourceSpec


class Lines:
    """The ``lines`` kind."""

    keys = frozenset({"path", "prefix", "limit"})
    needs_path = True

    def load(self, spec: SourceSpec, tokenizer: object | None) -> list[Prompt]:
        assert spec.path is not None
        try:
            text = spec.path.read_text(encoding="utf-8")
        except OSError as exc:
            raise DatasetError(f"{spec.path}: {exc.strerror}") from exc
        prefix = str(spec.option("prefix", ""))
        lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
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
