"""Side requests: everything loadtest asks of a server besides the load itself.

Scrapes of ``/metrics``, health checks of a managed target, fault hooks' requests and
tool calls to a URL all go through here, so that they honour the run's TLS settings
(``--ca-bundle``, ``--insecure``) as the load does, and so that a failure is said at
``-v`` instead of being swallowed. The API key goes only to the endpoint's own origin
(scheme, host and port): a DCGM exporter or a tool server on another host must not
receive it.
"""

from __future__ import annotations

import logging
import re
import ssl
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import aiohttp

from loadtest.transport.config import ClientConfig

__all__ = ["Fetched", "SideHttp", "get_text", "not_ready"]

log = logging.getLogger("loadtest")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


@dataclass(frozen=True, slots=True)
class SideHttp:
    """How side requests reach servers: the run's TLS, and its key for its own origin."""

    ssl: ssl.SSLContext | bool = True
    """aiohttp's ``ssl=``, as the load client has it."""
    api_key: str | None = field(default=None, repr=False)
    key_origin: str | None = None
    """The URL whose origin may receive ``api_key`` (the endpoint)."""

    @classmethod
    def for_endpoint(cls, config: ClientConfig) -> SideHttp:
        """Side requests of a run against ``config``'s endpoint."""
        return cls(ssl=config.ssl, api_key=config.api_key, key_origin=config.base_url)

    def headers(self, url: str) -> dict[str, str]:
        """The headers a request to ``url`` carries: the key only on the key's origin."""
        if self.api_key and self.key_origin and _origin(url) == _origin(self.key_origin):
            return {"Authorization": f"Bearer {self.api_key}"}
        return {}

    def session(self, timeout_s: float | None) -> aiohttp.ClientSession:
        """A session for side requests (the caller closes it)."""
        return aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=timeout_s),
            connector=aiohttp.TCPConnector(ssl=self.ssl),
        )


@dataclass(frozen=True, slots=True)
class Fetched:
    """A side GET's answer: its text, or why there is none."""

    text: str | None
    error: str | None = None


async def get_text(session: aiohttp.ClientSession, http: SideHttp, url: str, what: str) -> Fetched:
    """GET ``url`` as text; on any failure no text, the reason, and a line at ``-v``."""
    try:
        async with session.get(url, headers=http.headers(url)) as resp:
            if resp.status != 200:
                error = f"HTTP {resp.status}"
            else:
                return Fetched(await resp.text())
    except (aiohttp.ClientError, TimeoutError, OSError, UnicodeDecodeError) as exc:
        text = _one_line(str(exc))  # a server's bad status line spans lines
        error = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    log.debug("%s: %s failed: %s", what, url, error)
    return Fetched(None, error)


_HEAD = 80
"""Characters of a not-ready answer's body that an error quotes."""
_ERROR = 200
"""Characters of a failed GET's error: enough for aiohttp's connect errors."""


async def not_ready(session: aiohttp.ClientSession, url: str, timeout_s: float) -> str | None:
    """None when a GET of ``url`` answers 200 (ready), else what came back instead.

    Readiness is the status alone: vLLM, SGLang and TGI answer ``/health`` with an empty
    body, llama.cpp with JSON, an auth proxy with a page, so no body is read as "ready".
    Each GET is bounded by ``timeout_s``: a server that accepts and never answers would
    otherwise hold the wait past its deadline. The answer (status and the head of the
    body, or the error) is for the message said when the wait gives up.
    """
    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
            if resp.status == 200:
                return None
            return f"HTTP {resp.status}{await _head(resp)}"
    except TimeoutError:
        return f"no answer within {timeout_s:g} s"
    except aiohttp.ClientResponseError as exc:  # not HTTP: its message spans lines
        return f"{type(exc).__name__}: {_one_line(exc.message)[:_ERROR]}"
    except (aiohttp.ClientError, OSError) as exc:
        text = _one_line(str(exc))
        return f"{type(exc).__name__}: {text[:_ERROR]}" if text else type(exc).__name__


def _one_line(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


async def _head(resp: aiohttp.ClientResponse) -> str:
    try:
        raw = await resp.content.read(4 * _HEAD)
    except (aiohttp.ClientError, TimeoutError, OSError):
        return ""  # the status is the answer; a body cut short adds nothing to it
    text = _one_line(raw.decode("utf-8", "replace"))
    return f" ({text[:_HEAD]!r})" if text else " (an empty body)"
