"""``hook``: a shell command or an HTTP request at the window's start (and end).

For a draft server (or anything else) managed elsewhere: kubectl, docker, systemd, a
feature flag service. Played once, by the rig; what each action returned goes into the
window's entry.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypedDict

from loadtest.features.faults.kind import FaultKindBase, FaultSpec, Rig, spec_of
from loadtest.features.faults.own_figures import top_observed
from loadtest.model.json import JsonObject
from loadtest.model.verdict import Observed

if TYPE_CHECKING:
    from loadtest.config.toml_tables import Table
    from loadtest.features.faults.plan import FaultEvent

__all__ = ["HOOK", "HookObserved", "HookSpec"]


@dataclass(frozen=True, slots=True)
class HookSpec(FaultSpec):
    """The actions of a hook window (``{proxy}`` and ``{draft}`` are filled in)."""

    command: str | None = None
    url: str | None = None
    method: str = "POST"
    body: str = ""
    end_command: str | None = None
    end_url: str | None = None
    end_body: str = ""


class HookObserved(TypedDict, total=False):
    """What each action of a hook window returned (``hooks.run_command``: its exit,
    duration and output; ``hooks.run_request``: its status and duration; or the error)."""

    start_action: JsonObject
    end_action: JsonObject


class Hook(FaultKindBase):
    """The ``hook`` kind."""

    keys = frozenset({"command", "url", "method", "body", "end_command", "end_url", "end_body"})
    observed_model = HookObserved

    def parse(self, t: Table, event: FaultEvent) -> HookSpec:
        """A ``command`` or a ``url`` (and optionally their end-of-window twins)."""
        spec = HookSpec(
            command=t.get("command", str, None, "a shell command"),
            url=t.get("url", str, None, "a URL"),
            method=t.choice("method", "POST", ("GET", "POST", "PUT", "DELETE")),
            body=t.get("body", str, "", "a string"),
            end_command=t.get("end_command", str, None, "a shell command"),
            end_url=t.get("end_url", str, None, "a URL"),
            end_body=t.get("end_body", str, "", "a string"),
        )
        if spec.command is None and spec.url is None:
            raise t.fail("command", "a hook needs a command or a url")
        return spec

    async def inject(self, ev: FaultEvent, obs: Observed, rig: Rig) -> None:
        """The start action now, the end action (if any) when the window closes."""
        s = spec_of(ev, HookSpec)
        seen = top_observed(obs, HookObserved)
        seen["start_action"] = await _act(rig, s.command, s.url, s.method, s.body)
        await rig.sleep_to(ev.end_s)
        if s.end_command or s.end_url:
            seen["end_action"] = await _act(rig, s.end_command, s.end_url, s.method, s.end_body)


async def _act(
    rig: Rig, command: str | None, url: str | None, method: str, body: str
) -> JsonObject:
    # Imported here: reading a scenario loads this kind, and aiohttp is not needed then.
    from loadtest.features.faults.hooks import run_command, run_request

    if command:
        return await run_command(rig.fill(command))
    assert url is not None
    return await run_request(rig.fill(url), method, rig.fill(body), http=rig.http)


HOOK = Hook()
