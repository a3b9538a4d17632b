"""The one rule for endpoint URLs: a base URL with or without ``/v1`` means the same."""

from __future__ import annotations

__all__ = ["api_root", "server_root"]


def api_root(base_url: str) -> str:
    """``http://h:8000``, ``http://h:8000/`` and ``http://h:8000/v1`` all as ``.../v1``."""
    base = base_url.rstrip("/")
    return base if base.endswith("/v1") else base + "/v1"


def server_root(base_url: str) -> str:
    """The server's own root, where ``/metrics`` and ``/health`` live (no ``/v1``)."""
    return api_root(base_url).removesuffix("/v1")
