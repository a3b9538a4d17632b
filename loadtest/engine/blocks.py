"""Summary blocks as plugins: a feature's section of the results, declared in one object.

It sits below the features (the engine layer), so a feature declares its block beside
its hook in its own folder; the report only prints them (``engine.blocks``). A block is
registered under its key in the entry-point group ``loadtest.blocks`` (``model.blocks``;
loadtest's own exactly as a third party's) and declares:

- ``model``: the type of its value (a TypedDict, dataclass or msgspec Struct); summary.json
  is decoded with it and the published JSON Schema has it (``model.blocks.summary_type``);
- ``hook(scenario)``: the run hook that feeds it, attached in every process that sends
  load (``app.process.assembly``); None where this run has none (loadtest's own blocks are fed by
  the features that own them: the fault rig, the agent driver...);
- ``merge(parts, metrics)``: the block from every part handed in (``HookResult.blocks``)
  by every hook of every worker and by the coordinator, with the run's merged metrics.
  A part is plain JSON data: it crosses from a worker process or a Ray task as JSON,
  and in one process it goes through JSON too, so that one worker is the N = 1 case;
- ``empty``: summary.json's value where no part came (``OMIT``: no key at all);
- ``in_summary``: False for a block written as a file of its own by an output plugin
  (``multiturn.json``, ``workload.json``), which reads it from ``RunResults.blocks``;
- ``render(block, summary)``: its section of the printed report (None: none);
- ``panel(block)``: its panel on the dashboard (None: none), from the parts its hooks
  hand out while the run goes (``RunHook.live_parts``) or from summary.json in a replay.

``BlockBase`` has a default for each: a block overrides what differs.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol, cast, runtime_checkable

import msgspec
import orjson

from loadtest.errors import UsageError
from loadtest.model.blocks import block_names, load_block
from loadtest.registry import mismatches

if TYPE_CHECKING:
    from loadtest.config.scenario import Scenario
    from loadtest.engine.hooks import RunHook
    from loadtest.measure.recorders import Metrics
    from loadtest.model.summary import Summary

__all__ = [
    "OMIT",
    "BlockBase",
    "SummaryBlock",
    "block_hooks",
    "block_panels",
    "block_plugin",
    "join_parts",
    "live_json_parts",
    "merge_blocks",
    "summary_blocks",
]


class _Omit:
    """The ``empty`` of a block that summary.json leaves out when it has no part."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Final = _Omit()


@runtime_checkable
class SummaryBlock(Protocol):
    """What a summary block declares (an object, registered under its key)."""

    @property
    def model(self) -> object:
        """The type of its value (see ``model.blocks.BlockModel``)."""
        ...

    @property
    def in_summary(self) -> bool:
        """Whether it is a key of summary.json (False: a file of its own)."""
        ...

    @property
    def empty(self) -> object:
        """Its value where no part came; ``OMIT``: no key."""
        ...

    def hook(self, scenario: Scenario) -> RunHook | None:
        """The hook that feeds it in every process sending load; None: none here."""
        ...

    def merge(self, parts: Sequence[Any], metrics: Metrics) -> object:
        """The block from every part of the run (at least one), in order: the hooks of
        one process, then worker by worker, then the coordinator."""
        ...

    def render(self, block: Any, summary: Summary) -> str | None:
        """Its section of the printed report, after the table; None: none."""
        ...

    def panel(self, block: Any) -> str | None:
        """Its panel on the dashboard: a few short lines of the block merged so far (a
        live run, from its hooks' ``RunHook.live_parts``) or at the end (a replay);
        None: no panel."""
        ...


class BlockBase:
    """Defaults of a block: in summary.json, no key without a part, no hook of its own,
    one part (a block made in one place), not printed."""

    in_summary = True
    empty: object = OMIT

    def hook(self, scenario: Scenario) -> RunHook | None:
        """None: the block is fed by a feature's own hook."""
        return None

    def merge(self, parts: Sequence[Any], metrics: Metrics) -> object:
        """The one part; several are an error (a block that merges declares how)."""
        if len(parts) > 1:
            raise UsageError(f"{len(parts)} parts, and it declares no merge")
        return parts[0]

    def render(self, block: Any, summary: Summary) -> str | None:
        """None: not printed."""
        return None

    def panel(self, block: Any) -> str | None:
        """None: no panel on the dashboard."""
        return None


@functools.cache
def block_plugin(name: str) -> SummaryBlock:
    """The block registered as ``name``; ``UsageError`` when none is or it declares no
    block."""
    plugin = load_block(name)
    wrong = mismatches(plugin, SummaryBlock)
    if wrong or not isinstance(plugin, SummaryBlock):
        raise UsageError(
            f"the summary block plugin for {name!r} does not fit a block: {'; '.join(wrong)} "
            "(subclass loadtest.plugins.BlockBase): see docs/plugins.md"
        )
    return plugin


def block_hooks(scenario: Scenario) -> list[RunHook]:
    """The hooks of every registered block that feeds itself in this run."""
    return [h for name in block_names() if (h := block_plugin(name).hook(scenario)) is not None]


def join_parts(*given: Mapping[str, Sequence[object]]) -> dict[str, tuple[object, ...]]:
    """Parts by block name from several places (workers in order, then the
    coordinator), each name's parts in the order given."""
    out: dict[str, list[object]] = {}
    for parts in given:
        for name, some in parts.items():
            out.setdefault(name, []).extend(some)
    return {name: tuple(p) for name, p in out.items()}


def live_json_parts(parts: Mapping[str, Sequence[object]]) -> dict[str, list[object]]:
    """``parts`` as JSON for another process's panels (a worker's ``live.json``); a part
    that is not JSON data is left out: a plugin's bug shows as a missing panel while the
    run goes, and is named when the run's blocks merge at its end."""
    out: dict[str, list[object]] = {}
    for name, some in parts.items():
        for part in some:
            try:
                made = _as_json(name, part)
            except UsageError:
                continue
            out.setdefault(name, []).append(made)
    return out


def _as_json(name: str, part: object) -> object:
    try:
        return orjson.loads(orjson.dumps(part))
    except TypeError as exc:
        raise UsageError(f"a part of the summary block {name!r} is not JSON data: {exc}") from exc


def merge_blocks(parts: Mapping[str, Sequence[object]], metrics: Metrics) -> dict[str, object]:
    """Each block of a run from its parts (``RunOutcome.blocks``, or a run's workers and
    coordinator together), with the run's merged ``metrics``, checked against its model;
    ``UsageError`` naming the block when a part has no block registered, when its merge
    fails or when what it made breaks its model (a plugin's bug: summary.json would not
    load back)."""
    merged: dict[str, object] = {}
    for name, given in parts.items():
        if not given:
            continue
        plugin = block_plugin(name)
        as_json = [_as_json(name, p) for p in given]
        try:
            block = plugin.merge(as_json, metrics)
        except UsageError as exc:
            raise UsageError(f"the summary block {name!r} failed to merge: {exc}") from exc
        except Exception as exc:  # a plugin's own bug, named
            raise UsageError(
                f"the summary block {name!r} failed to merge: {type(exc).__name__}: {exc}"
            ) from exc
        try:
            msgspec.convert(block, plugin.model)
        except msgspec.ValidationError as exc:
            raise UsageError(f"the summary block {name!r} breaks its model: {exc}") from exc
        merged[name] = block
    return merged


def summary_blocks(merged: Mapping[str, object]) -> dict[str, object]:
    """summary.json's block keys: each registered in-summary block's merged value, or
    its ``empty`` where the run had none (unless that is ``OMIT``)."""
    out: dict[str, object] = {}
    for name in block_names():
        plugin = block_plugin(name)
        if not plugin.in_summary:
            continue
        if name in merged:
            out[name] = merged[name]
        elif plugin.empty is not OMIT:
            out[name] = _as_json(name, plugin.empty)  # a copy: the same [] in every summary
    return out


def block_panels(blocks: Mapping[str, object], metrics: Metrics | None = None) -> tuple[str, ...]:
    """The dashboard's panels of ``blocks`` (a block's value by name; with ``metrics``,
    its parts so far, merged here first), in the registry's order. A block whose merge or
    panel fails shows why in its place: the dashboard is not where a plugin's bug may end
    the view of a run."""
    panels = []
    for name in block_names():
        if name not in blocks:
            continue
        plugin = block_plugin(name)
        try:
            value = blocks[name]
            if metrics is not None:
                parts = [_as_json(name, p) for p in cast(Sequence[object], value)]
                value = plugin.merge(parts, metrics) if parts else None
            text = plugin.panel(value) if value is not None else None
        except Exception as exc:  # a plugin's own bug, named in its panel
            text = f"{name}: no panel ({type(exc).__name__}: {exc})"
        if text:
            panels.append(text)
    return tuple(panels)
