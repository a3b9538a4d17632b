"""Token counts from a real tokenizer: the endpoint's own, or a local ``tokenizer.json``.

llama.cpp, vLLM and SGLang serve ``POST /tokenize`` and ``/detokenize``; the bodies
differ (``content`` vs ``prompt``), so one body carries both and the answer is read
either way. Calls are plain blocking HTTP: they run while the workload is built, before
the run's clock starts.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Protocol

from loadtest.errors import DatasetError, MissingPackageError

__all__ = ["EndpointTokenizer", "LocalTokenizer", "Tokenizer", "cut_to_tokens", "open_tokenizer"]

_TIMEOUT_S = 30.0
_FIX_STEPS = 8


class Tokenizer(Protocol):
    """What building exact-length prompts needs of a tokenizer."""

    name: str

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, without special tokens."""
        ...

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids``."""
        ...


class LocalTokenizer:
    """A Hugging Face ``tokenizer.json`` through the ``tokenizers`` package."""

    def __init__(self, path: Path) -> None:
        try:
            from tokenizers import Tokenizer as HfTokenizer
        except ImportError as exc:
            raise MissingPackageError(
                "--tokenizer", "tokenizers", "pip install tokenizers"
            ) from exc
        try:
            self._tok = HfTokenizer.from_file(str(path))
        except Exception as exc:  # the package raises plain Exceptions for bad files
            raise DatasetError(f"{path}: not a tokenizer.json ({exc})") from exc
        self.name = str(path)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        return list(self._tok.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids``."""
        return str(self._tok.decode(ids, skip_special_tokens=False))


class EndpointTokenizer:
    """The serving engine's own tokenizer, through its ``/tokenize`` and ``/detokenize``."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None) -> None:
        self._root = _server_root(base_url)
        self._model = model
        self._key = api_key
        self.name = f"{self._root}/tokenize"

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, as the server counts them."""
        answer = self._post(
            "/tokenize",
            {"content": text, "prompt": text, "model": self._model, "add_special_tokens": False},
        )
        tokens = answer.get("tokens")
        if not isinstance(tokens, list):
            raise DatasetError(f"{self.name}: the answer has no 'tokens' list")
        # llama.cpp with_pieces answers objects; plain answers are ints.
        ids = [t.get("id") if isinstance(t, dict) else t for t in tokens]
        wrong = [t for t in ids if not isinstance(t, int) or isinstance(t, bool)]
        if wrong:
            raise DatasetError(
                f"{self.name}: 'tokens' holds {wrong[0]!r}, not token ids (integers, or "
                "objects with an 'id')"
            )
        return [int(t) for t in ids if isinstance(t, int)]

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids``, as the server writes them."""
        answer = self._post("/detokenize", {"tokens": ids, "model": self._model})
        text = answer.get("content", answer.get("prompt"))
        if not isinstance(text, str):
            raise DatasetError(f"{self._root}/detokenize: the answer has no text")
        return text

    def _post(self, path: str, body: dict[str, object]) -> dict[str, object]:
        headers = {"Content-Type": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        req = urllib.request.Request(
            self._root + path, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        url = self._root + path
        try:
            with urllib.request.urlopen(req, timeout=_TIMEOUT_S) as resp:
                status, ctype, raw = resp.status, resp.headers.get_content_type(), resp.read()
        except urllib.error.HTTPError as exc:
            # A 404 page, an auth proxy's 401: the status and what came back.
            raise DatasetError(f"{url} answered HTTP {exc.code} ({_head(exc.read())})") from exc
        except (urllib.error.URLError, OSError) as exc:
            raise DatasetError(f"{url}: {exc}") from exc
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            # It said only "Expecting value: line 1 column 1 (char 0)".
            raise DatasetError(
                f"{url} answered HTTP {status} with {ctype}, not JSON ({_head(raw)})"
            ) from exc
        if not isinstance(answer, dict):
            raise DatasetError(f"{url}: expected a JSON object, got {_head(raw)}")
        return answer


def _head(body: bytes) -> str:
    """The start of an answer, quoted, for an error; or that it was empty."""
    text = " ".join(body[:80].decode("utf-8", "replace").split())
    return repr(text) if text else "an empty body"


def _server_root(base_url: str) -> str:
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


def open_tokenizer(
    path: Path | None, endpoint: str | None, model: str | None, api_key: str | None = None
) -> Tokenizer:
    """The local tokenizer when a path is given, else the endpoint's if it has one.

    Raises ``DatasetError`` saying which of the two to provide when neither works.
    """
    if path is not None:
        return LocalTokenizer(path)
    if endpoint is not None:
        tok = EndpointTokenizer(endpoint, model or "", api_key)
        try:
            if tok.encode("hello world"):
                return tok
        except DatasetError as exc:
            raise DatasetError(
                f"exact token lengths need a tokenizer: the endpoint has none ({exc}); "
                "serve from llama.cpp, vLLM or SGLang (they answer POST /tokenize), or pass "
                "--tokenizer PATH to the model's tokenizer.json"
            ) from exc
    raise DatasetError(
        "exact token lengths need a tokenizer: pass --tokenizer PATH to the model's "
        "tokenizer.json (or set tokenizer = in the source), or run against an endpoint that "
        "answers POST /tokenize (llama.cpp, vLLM, SGLang)"
    )


def cut_to_tokens(tok: Tokenizer, ids: list[int], n: int) -> tuple[str, int]:
    """Text of exactly ``n`` tokens from ``ids`` (which must hold more than ``n``).

    Decoding ``ids[:n]`` and encoding again can merge or split at the cut; the cut moves
    until the text re-encodes to ``n`` tokens. Where it cannot settle (the cut falls
    inside a character that byte tokens spell, and moving it by one token jumps from
    below ``n`` to above it), the text is cut instead (``_cut_text``). Returns the text
    and its real count (``n`` unless neither settles).
    """
    k = n
    tried: set[int] = set()
    for _ in range(_FIX_STEPS):
        text = tok.decode(ids[:k])
        count = len(tok.encode(text))
        if count == n:
            return text, count
        if k in tried:
            break
        tried.add(k)
        k = max(1, min(k + n - count, len(ids)))
    return _cut_text(tok, tok.decode(ids), n)


_DROPS = 32
"""Characters ``_cut_text`` may leave out before it gives up."""


def _cut_text(tok: Tokenizer, text: str, n: int) -> tuple[str, int]:
    """The shortest head of ``text`` that encodes to ``n`` tokens, found by bisection.

    Where one character takes the count from below ``n`` to above it (a character of
    several byte tokens), that character is left out and the search runs again: the
    prompt then lacks one character of the corpus, but has exactly ``n`` tokens.
    """
    count, cut = len(tok.encode(text)), len(text)
    for _ in range(_DROPS):
        if count < n:
            return text, count
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi) // 2
            if len(tok.encode(text[:mid])) >= n:
                hi = mid
            else:
                lo = mid + 1
        cut, count = lo, len(tok.encode(text[:lo]))
        if count == n:
            return text[:cut], count
        text = text[: cut - 1] + text[cut:]
        count = len(tok.encode(text))
    return text[:cut], len(tok.encode(text[:cut]))
