"""How loadtest proves who it is and whom it trusts: the API key and TLS verification.

The key is read from an environment variable or a file, never from a scenario or a
command-line flag, because scenarios are committed and flags show in process lists and
shell history. Everything the endpoint sends back that might echo the key (error bodies,
error events) passes through ``redact`` before it reaches a record, a log or the screen.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from pathlib import Path

from loadtest.config.auth_table import DEFAULT_KEY_ENV, AuthSpec
from loadtest.errors import UsageError

__all__ = ["DEFAULT_KEY_ENV", "REDACTED", "AuthSpec", "redact", "resolve_api_key", "tls_context"]

REDACTED = "[redacted]"


def resolve_api_key(spec: AuthSpec, environ: Mapping[str, str] | None = None) -> str | None:
    """The key ``spec`` points at, or None; ``UsageError`` when a named file is unusable."""
    if spec.api_key_file is not None:
        path = Path(spec.api_key_file).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise UsageError(f"cannot read the API key file {path}: {why}") from exc
        key = text.strip().splitlines()[0].strip() if text.strip() else ""
        if not key:
            raise UsageError(f"the API key file {path} is empty")
        return key
    env = os.environ if environ is None else environ
    return env.get(spec.api_key_env) or None


def redact(text: str, key: str | None) -> str:
    """``text`` with every occurrence of ``key`` replaced by ``[redacted]``."""
    if not key or key not in text:
        return text
    return text.replace(key, REDACTED)


def tls_context(ca_bundle: str | None, insecure: bool) -> ssl.SSLContext | bool:
    """What aiohttp's ``ssl=`` gets: verified by default, a private CA, or no checks.

    ``insecure`` turns verification off entirely (self-signed staging endpoints); it must
    be asked for explicitly and is said on start.
    """
    if insecure and ca_bundle:
        raise UsageError("--insecure and --ca-bundle exclude each other: pick one")
    if insecure:
        return False
    if ca_bundle is None:
        return True
    try:
        return ssl.create_default_context(cafile=ca_bundle)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"cannot load the CA bundle {ca_bundle}: {exc}") from exc
