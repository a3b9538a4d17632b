"""``/tokenize`` and ``/detokenize`` for the simulator, in llama.cpp's and vLLM's formats.

llama.cpp takes ``{"content"}`` and answers ``{"tokens"}``; vLLM takes ``{"prompt"}`` (or
``{"messages"}``) and answers ``{"count", "max_model_len", "tokens", "token_strs"}``.

The simulator counts a prompt as one token per four characters, so its tokenizer
does too: a token is a run of four characters, ids handed out as pieces are first
seen. Exact-length workloads can then be checked against its ``prompt_tokens``.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson
from aiohttp import web

from loadtest.errors import MissingExtraError, UsageError
from loadtest.model.json import JsonObject

__all__ = ["add_tokenize_routes", "count_prompt_tokens", "real_tokenizer"]

_PIECE = 4
_MAX_VOCAB = 2_000_000
MAX_MODEL_LEN = 32768
"""The context the simulator claims (its plans cap ``max_tokens`` there too)."""


class _Vocabulary:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.pieces: list[str] = []

    def encode(self, text: str) -> list[int] | None:
        out = []
        for i in range(0, len(text), _PIECE):
            piece = text[i : i + _PIECE]
            tid = self.ids.get(piece)
            if tid is None:
                if len(self.pieces) >= _MAX_VOCAB:
                    return None
                tid = self.ids[piece] = len(self.pieces)
                self.pieces.append(piece)
            out.append(tid)
        return out

    @property
    def size(self) -> int:
        return len(self.pieces)

    def piece(self, token: int) -> str:
        return self.pieces[token]

    def decode(self, ids: list[int]) -> str:
        return "".join(self.pieces[t] for t in ids)


@functools.cache
def real_tokenizer(path: str) -> Any:
    """A ``tokenizer.json`` (the ``tokenizers`` package), loaded once per process."""
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise MissingExtraError("the simulator's --tokenizer", "tokens") from exc
    try:
        return Tokenizer.from_file(path)
    except Exception as exc:  # the package raises plain Exceptions for a bad file
        raise UsageError(f"sim tokenizer {path}: not a tokenizer.json ({exc})") from exc


class _RealVocabulary:
    """The ids of a real tokenizer, for ``/tokenize`` and ``/detokenize``."""

    def __init__(self, path: str) -> None:
        self._tok = real_tokenizer(path)
        self.size = int(self._tok.get_vocab_size())

    def encode(self, text: str) -> list[int] | None:
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def piece(self, token: int) -> str:
        return str(self._tok.id_to_token(token))

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=False))


async def _body(request: web.Request) -> dict[str, object] | None:
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        return None
    return body if isinstance(body, dict) else None


def _text(body: dict[str, object]) -> str | None:
    text = body.get("content", body.get("prompt"))
    if isinstance(text, str):
        return text
    messages = body.get("messages")
    if isinstance(messages, list):
        parts = [m.get("content") for m in messages if isinstance(m, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    return None


def add_tokenize_routes(app: web.Application, tokenizer: str = "") -> None:
    """Serve ``POST /tokenize`` and ``POST /detokenize`` on ``app``: four characters a
    token, or the ids of a real ``tokenizer``."""
    vocab: _Vocabulary | _RealVocabulary = (
        _RealVocabulary(tokenizer) if tokenizer else _Vocabulary()
    )

    async def tokenize(request: web.Request) -> web.Response:
        body = await _body(request)
        text = None if body is None else _text(body)
        if text is None:
            problem = "'content' (llama.cpp), 'prompt' or 'messages' (vLLM) must be given"
            return web.json_response({"error": problem}, status=400)
        ids = vocab.encode(text)
        if ids is None:
            return web.json_response({"error": "vocabulary full"}, status=503)
        answer: dict[str, object] = {"tokens": ids}
        if body is not None and ("prompt" in body or "messages" in body):
            answer |= {
                "count": len(ids),
                "max_model_len": MAX_MODEL_LEN,
                "token_strs": [vocab.piece(t) for t in ids],
            }
        return web.Response(body=orjson.dumps(answer), content_type="application/json")

    async def detokenize(request: web.Request) -> web.Response:
        body = await _body(request)
        ids = None if body is None else body.get("tokens")
        if not isinstance(ids, list) or not all(
            isinstance(t, int) and 0 <= t < vocab.size for t in ids
        ):
            return web.json_response({"error": "'tokens' must be known token ids"}, status=400)
        text = vocab.decode(ids)
        return web.Response(body=orjson.dumps({"content": text}), content_type="application/json")

    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)


def _prompt_text(request: JsonObject) -> str:
    prompt = request.get("prompt")
    if isinstance(prompt, str):
        return prompt
    parts = []
    for m in request.get("messages") or ():
        if isinstance(m, dict):
            content = m.get("content")
            parts.append(content if isinstance(content, str) else str(content or ""))
    return "".join(parts)


def count_prompt_tokens(tokenizer: str, request: JsonObject) -> int:
    """A request's prompt tokens: by the ``tokenizer.json`` at ``tokenizer``, else (no
    path) four characters a token, a shorter last run one more, as ``/tokenize`` counts
    (so a prompt cut to n tokens by ``/tokenize`` is served as n, whatever its length)."""
    text = _prompt_text(request)
    if tokenizer:
        return max(1, len(real_tokenizer(tokenizer).encode(text).ids))
    return max(1, -(-len(text) // _PIECE))
