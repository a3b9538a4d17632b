"""Chat messages and tools in the Responses API's shapes (``POST /v1/responses``).

Loadtest keeps every conversation as chat messages (data sets, agent sessions, recorded
turns); a request to the Responses API carries them as *input items*. The mapping is
one way and total: a message with a string (or text-part) content stays a message, an
assistant's ``tool_calls`` become ``function_call`` items, a ``tool`` message becomes a
``function_call_output`` item, so an agent's history round-trips call ids intact.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from loadtest.model.json import JsonObject

__all__ = ["input_items", "responses_tools"]


def _content(content: object, role: str) -> object:
    if not isinstance(content, list):
        return "" if content is None else content
    kind = "output_text" if role == "assistant" else "input_text"
    parts: list[object] = []
    for part in content:
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append({"type": kind, "text": part.get("text", "")})
        else:
            parts.append(part)  # images and the like: passed on as given
    return parts


def input_items(messages: Iterable[JsonObject]) -> list[JsonObject]:
    """The Responses ``input`` list for a chat conversation."""
    items: list[JsonObject] = []
    for m in messages:
        role = str(m.get("role", "user"))
        if role == "tool":
            out = m.get("content")
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": str(m.get("tool_call_id", "")),
                    "output": out if isinstance(out, str) else str(out or ""),
                }
            )
            continue
        calls = m.get("tool_calls") if role == "assistant" else None
        content = m.get("content")
        if content or not calls:
            items.append({"role": role, "content": _content(content, role)})
        for call in calls or ():
            fn = call.get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": str(call.get("id", "")),
                    "name": str(fn.get("name", "")),
                    "arguments": str(fn.get("arguments") or ""),
                }
            )
    return items


def responses_tools(tools: Sequence[JsonObject]) -> list[JsonObject]:
    """Chat tools (``{"type": "function", "function": {...}}``) as Responses tools.

    ``strict`` is set false on purpose: the Responses API defaults it to true, which
    constrains decoding and rejects schemas chat accepts (BFCL's among them); the chat
    endpoint's behaviour is the one measured on both.
    """
    out: list[JsonObject] = []
    for tool in tools:
        fn = tool.get("function")
        if tool.get("type") != "function" or not isinstance(fn, dict):
            out.append(tool)  # already in the Responses shape, or a built-in tool
            continue
        item: JsonObject = {"type": "function", "name": fn.get("name", "")}
        if "description" in fn:
            item["description"] = fn["description"]
        item["parameters"] = fn.get("parameters") or {"type": "object", "properties": {}}
        item["strict"] = bool(fn.get("strict", False))
        out.append(item)
    return out
