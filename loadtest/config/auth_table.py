"""The scenario's ``[auth]`` table: where the API key comes from (never the key itself).

A spec only; ``loadtest.transport.auth`` reads the key and builds the TLS context.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_KEY_ENV", "AuthSpec"]

DEFAULT_KEY_ENV = "OPENAI_API_KEY"


@dataclass(frozen=True, slots=True)
class AuthSpec:
    """Where the API key comes from: the ``[auth]`` table of a scenario, or flags."""

    api_key_env: str = DEFAULT_KEY_ENV
    """The environment variable that holds the key (unset or empty: no key)."""
    api_key_file: str | None = None
    """A file whose first line is the key; wins over the variable when given."""
