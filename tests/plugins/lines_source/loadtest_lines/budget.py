"""A stop rule plugin: ``kind = "tokens"`` ends the load once it has read ``budget``
output tokens, a normal end (the run does not fail for it).

A cost-capped soak test: run until the endpoint has produced so many tokens. Each worker
reads its part of the budget (its requests are its own), rounded up. Nothing here is
part of loadtest: it uses only the plugin interface a third party sees.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadtest.plugins import RunSoFar, Table


@dataclass(frozen=True)
class TokenBudget:
    budget: int


class Tokens:
    keys = frozenset({"budget"})
    fails = False

    def parse(self, table: Table) -> TokenBudget:
        budget = table.integer("budget", None, minimum=1)
        if budget is None:
            raise table.fail("budget", "a token budget needs budget = N (output tokens)")
        return TokenBudget(budget)

    def share(self, settings: TokenBudget, worker: int, workers: int) -> TokenBudget:
        return TokenBudget(-(-settings.budget // workers))

    def reached(self, settings: TokenBudget, seen: RunSoFar) -> str | None:
        if seen.output_tokens < settings.budget:
            return None
        return f"tokens: {seen.output_tokens} output tokens read (budget {settings.budget})"


TOKENS = Tokens()
