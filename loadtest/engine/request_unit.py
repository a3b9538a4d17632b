"""The default unit of load: one request from the prompt pool.

An agent scenario replaces it with its own ``UnitOfLoad`` (a whole task per unit).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from loadtest.config.scenario import Scenario
from loadtest.datasets.prompt import PromptPool
from loadtest.engine.hooks import CancelOrder, RunContext, RunHook
from loadtest.model.prompt import Prompt
from loadtest.protocol.openai import build_payload

__all__ = ["RequestUnit", "prompt_body", "raise_if_cancelling"]


class RequestUnit:
    """Draws a prompt, sends it (cancelling it on a fault's order), accounts for it."""

    def __init__(
        self, scenario: Scenario, model: str, pool: PromptPool, cancel_hooks: Sequence[RunHook]
    ) -> None:
        self.scenario = scenario
        self.model = model
        self.pool = pool
        self._cancel_hooks = tuple(cancel_hooks)
        self._bodies: dict[int, bytes] = {}

    async def run_unit(self, ctx: RunContext, index: int, intended_ns: int) -> float | None:
        """Send one request; returns its Retry-After, if it was told one."""
        prompt = self.pool.draw()
        order: CancelOrder | None = None
        for h in self._cancel_hooks:
            if (order := h.cancel_order(intended_ns)) is not None:
                break
        rec = await ctx.client.send(
            index=index,
            prompt=prompt,
            body=self._body(prompt),
            intended_ns=intended_ns,
            warmup=ctx.warming_up_at(intended_ns),
            cancel_after_tokens=order.after_tokens if order else None,
            cancel_after_ms=order.after_ms if order else None,
        )
        ctx.account(rec, prompt)
        if rec.outcome == "cancelled":
            raise_if_cancelling()
        return rec.retry_after_s

    def _body(self, prompt: Prompt) -> bytes:
        body = self._bodies.get(id(prompt))
        if body is None:
            body = prompt_body(self.scenario, self.model, prompt)
            self._bodies[id(prompt)] = body
        return body


def raise_if_cancelling() -> None:
    """Re-raise a cancellation the client turned into a ``cancelled`` record.

    The client never raises: cancelled from outside, it returns the request's record
    and leaves the task's cancellation pending. Once that record is accounted for,
    the cancellation goes on up, as asyncio means it.
    """
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


def prompt_body(sc: Scenario, model: str, prompt: Prompt) -> bytes:
    """The request body of one prompt under a scenario: the one rule for every unit."""
    return build_payload(
        api=sc.api,
        model=model,
        messages=list(prompt.messages),
        text=prompt.text,
        stream=sc.stream,
        max_tokens=prompt.max_tokens or sc.max_tokens,
        sampling={**sc.sampling, **prompt.sampling} if prompt.sampling else sc.sampling,
        tools=list(prompt.tools) or None,
    )
