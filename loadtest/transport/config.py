"""How to reach the endpoint: the client's frozen configuration."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field

from loadtest.config.scenario import TimeoutSpec
from loadtest.protocol.sse import DEFAULT_MAX_EVENT_BYTES
from loadtest.transport.urls import api_root

__all__ = ["MAX_BODY_BYTES", "STREAM_TYPES", "ClientConfig"]

MAX_BODY_BYTES = 16 << 20
"""The largest non-streamed body read; a longer one fails as ``protocol``."""
STREAM_TYPES = ("text/event-stream", "application/octet-stream")
_PATHS = {"chat": "/chat/completions", "completions": "/completions", "responses": "/responses"}


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """How to reach the endpoint."""

    base_url: str
    api: str = "chat"
    stream: bool = True
    timeouts: TimeoutSpec = field(default_factory=TimeoutSpec)
    concurrency: int = 0
    """Connection pool size; 0 means unlimited."""
    keepalive: bool = True
    api_key: str | None = field(default=None, repr=False)
    ssl: ssl.SSLContext | bool = True
    """aiohttp's ``ssl=``: True verifies, a context trusts a private CA, False trusts all."""
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    keep_outputs: bool = False
    """Digest each answer (text and tool calls) into the record, for output equivalence."""
    source_addresses: tuple[str, ...] = ()
    """Local addresses connections leave from, one pool each, in turn (empty: the
    kernel's choice); see ``transport.sources``."""

    @property
    def url(self) -> str:
        """The full URL requests are posted to."""
        return api_root(self.base_url) + _PATHS.get(self.api, "/completions")
