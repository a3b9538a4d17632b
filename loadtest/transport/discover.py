"""Asking the endpoint which model it serves (``GET /v1/models``)."""

from __future__ import annotations

import ssl

import aiohttp
import orjson

from loadtest.errors import EndpointError
from loadtest.transport.auth import redact
from loadtest.transport.outcome import describe
from loadtest.transport.urls import api_root

__all__ = ["discover_model"]


async def discover_model(
    base_url: str,
    api_key: str | None = None,
    timeout_s: float = 10.0,
    tls: ssl.SSLContext | bool = True,
) -> str:
    """The first model id ``GET /v1/models`` lists; ``EndpointError`` when unreachable."""
    url = api_root(base_url) + "/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            session.get(url, headers=headers, ssl=tls, allow_redirects=False) as resp,
        ):
            if resp.status != 200:
                raise EndpointError(
                    f"{url} answered HTTP {resp.status}; name the model with --model"
                )
            body = await resp.read()
            content_type = resp.content_type
    except (aiohttp.ClientError, TimeoutError) as exc:
        raise EndpointError(redact(f"cannot reach {url}: {describe(exc)}", api_key)) from exc
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        # An auth proxy or login page answers 200 with HTML: say what came back.
        start = body[:60].decode("utf-8", "replace").strip() or "an empty body"
        raise EndpointError(
            f"{url} answered HTTP 200 with {content_type}, not JSON ({start!r}); "
            "check the URL and any proxy in front of it, or name the model with --model"
        ) from None
    models = data.get("data") if isinstance(data, dict) else None
    if not models or not isinstance(models[0], dict) or "id" not in models[0]:
        raise EndpointError(f"{url} lists no model; name the model with --model")
    return str(models[0]["id"])
