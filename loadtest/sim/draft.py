"""The simulated draft server: proposes ``k`` tokens per sequence for a target's step.

``POST /draft`` with ``{"n": sequences, "k": tokens}`` answers ``{"proposals": [[id,
...], ...]}`` after ``k * draft_token_ms``. Its behaviour can be switched at run time
through ``POST /sim/mode`` (``ok``, ``garbage``, ``hang``) so tests and demos can break
the draft without restarting it; network faults come from the fault proxy instead.
"""

from __future__ import annotations

import asyncio
import random

import orjson
from aiohttp import web

from loadtest.sim.model import SimConfig
from loadtest.sim.prometheus import Sample, metrics_handler, plain_families

__all__ = ["DRAFT_KEY", "DRAFT_MODES", "DraftServer", "build_draft_app"]

DRAFT_MODES = ("ok", "garbage", "hang")
_GARBAGE = b'{"proposals": "\x00\xff not tokens'


class DraftServer:
    """State of one draft server process."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.mode = config.draft_mode
        self.served = 0
        self.proposed_tokens = 0
        self._rng = random.Random(config.seed)

    async def draft(self, request: web.Request) -> web.Response:
        """``POST /draft``."""
        try:
            req = orjson.loads(await request.read())
            n, k = int(req["n"]), int(req["k"])
        except (ValueError, KeyError, TypeError):
            return web.json_response({"error": "body must be {'n': int, 'k': int}"}, status=400)
        if self.mode == "hang":
            await asyncio.Event().wait()  # until the target gives up and disconnects
        await asyncio.sleep(k * self.config.draft_token_ms / 1000)
        self.served += 1
        if self.mode == "garbage":
            return web.Response(
                body=b'{"proposals": "\x00\xff not tokens', content_type="text/plain"
            )
        self.proposed_tokens += n * k
        rnd = self._rng.randrange
        body = {"proposals": [[rnd(32000) for _ in range(k)] for _ in range(n)]}
        return web.Response(body=orjson.dumps(body), content_type="application/json")

    async def set_mode(self, request: web.Request) -> web.Response:
        """``POST /sim/mode`` with ``{"mode": "ok" | "garbage" | "hang"}``."""
        try:
            mode = orjson.loads(await request.read())["mode"]
        except (ValueError, KeyError, TypeError):
            mode = None
        if mode not in DRAFT_MODES:
            return web.json_response({"error": f"mode must be one of {DRAFT_MODES}"}, status=400)
        self.mode = mode
        return web.json_response({"mode": mode})

    async def health(self, request: web.Request) -> web.Response:
        """``GET /health``."""
        return web.json_response({"status": "ok", "role": "draft", "mode": self.mode})

    def samples(self) -> list[Sample]:
        """(name, type, value, help) of what ``/metrics`` shows."""
        return [
            ("loadtest_sim_draft_requests", "counter", self.served, "Draft steps served."),
            (
                "loadtest_sim_draft_proposed_tokens",
                "counter",
                self.proposed_tokens,
                "Tokens proposed.",
            ),
        ]


DRAFT_KEY: web.AppKey[DraftServer] = web.AppKey("draft", DraftServer)


def build_draft_app(config: SimConfig) -> web.Application:
    """The aiohttp application of a draft server."""
    draft = DraftServer(config)
    app = web.Application()
    app[DRAFT_KEY] = draft
    app.router.add_post("/draft", draft.draft)
    app.router.add_post("/sim/mode", draft.set_mode)
    app.router.add_get("/health", draft.health)
    app.router.add_get("/metrics", metrics_handler(lambda: plain_families(draft.samples())))
    return app
