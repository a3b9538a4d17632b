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
import ssl
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import aiohttp

from loadtest.transport.config import ClientConfig

__all__ = ["Fetched", "SideHttp", "get_text"]

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
        error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    log.debug("%s: %s failed: %s", what, url, error)
    return Fetched(None, error)
