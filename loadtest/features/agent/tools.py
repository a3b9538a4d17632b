"""Tool "execution" for agent sessions: a drawn latency, or a real HTTP call."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import aiohttp
import orjson

from loadtest.features.agent.session import ToolError
from loadtest.features.agent.taskspec import AgentSpec
from loadtest.protocol.openai import ToolCall
from loadtest.transport.side import SideHttp

__all__ = ["ToolRunner"]


class ToolRunner:
    """Answers tool calls as the scenario says; one per run, shared by its sessions."""

    def __init__(self, spec: AgentSpec, seed: int = 0) -> None:
        self.spec = spec
        self._rng = random.Random(seed ^ 0x7001)
        self._session: aiohttp.ClientSession | None = None
        self.calls = 0
        self.http = SideHttp()
        """How a ``tool = "url"`` call is sent: the run sets its TLS here before opening."""

    async def __aenter__(self) -> ToolRunner:
        if self.spec.tool == "url":
            self._session = self.http.session(timeout_s=self.spec.tool_timeout_s)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._session is not None:
            await self._session.close()

    def latency_s(self) -> float:
        """One drawn tool latency, in seconds."""
        ms = self.spec.tool_ms
        if self.spec.tool == "lognormal" and self.spec.tool_sigma > 0:
            ms *= self._rng.lognormvariate(0.0, self.spec.tool_sigma)
        return ms / 1000

    def for_session(self) -> Callable[[ToolCall, str | None], Awaitable[str]]:
        """The tool runner of one session: its simulated results number its own calls.

        A run-wide count would make a session's later request bodies, and so every draw
        the simulator makes from them, depend on how the concurrent sessions interleaved.
        """
        own = 0

        async def run(call: ToolCall, recorded: str | None) -> str:
            nonlocal own
            own += 1
            return await self(call, recorded, own)

        return run

    async def __call__(self, call: ToolCall, recorded: str | None, number: int = 1) -> str:
        """The result of ``call``, the session's ``number``-th: the recorded one, a
        simulated one, or the URL's answer."""
        self.calls += 1
        if self._session is not None:
            return await self._post(call)
        await asyncio.sleep(self.latency_s())
        if recorded is not None:
            return recorded
        return orjson.dumps({"status": "ok", "tool": call.name, "call": number}).decode()

    async def _post(self, call: ToolCall) -> str:
        assert self._session is not None
        assert self.spec.tool_url is not None
        try:
            args = orjson.loads(call.arguments or "{}")
        except orjson.JSONDecodeError:
            args = call.arguments
        body = orjson.dumps({"name": call.name, "arguments": args})
        try:
            async with self._session.post(
                self.spec.tool_url,
                data=body,
                headers={
                    "Content-Type": "application/json",
                    **self.http.headers(self.spec.tool_url),
                },
            ) as resp:
                text = await resp.text()
                if resp.status >= 400:
                    raise ToolError(f"{self.spec.tool_url} answered HTTP {resp.status}")
                return text
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise ToolError(f"{self.spec.tool_url}: {type(exc).__name__} {exc}") from exc
