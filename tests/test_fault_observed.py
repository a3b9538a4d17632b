"""What the rig observes of a kind's windows: declared in the kind's module (its
``observed_model``), written into ``Observed`` through ``top_observed``, copied into the
window's ``faults`` entry, in summary.json's schema and checked when it is read back,
with no key of a kind's in ``RigObserved``."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict, get_type_hints

import orjson
import pytest

from loadtest.errors import ResultFileError, UsageError
from loadtest.features.faults.entry import entry_type, fault_entry, observed_keys, observed_model
from loadtest.features.faults.kind import FaultKindBase, fault_kind
from loadtest.features.faults.kinds.cancel import CancelObserved
from loadtest.features.faults.kinds.hook import HookObserved, HookSpec
from loadtest.features.faults.kinds.idle import IdleObserved, IdleSpec
from loadtest.features.faults.kinds.restart import RestartObserved
from loadtest.features.faults.own_figures import top_figures, top_observed
from loadtest.features.faults.plan import FaultEvent, FaultPlan
from loadtest.features.faults.rig import FaultRig
from loadtest.features.faults.verdict import judge_windows
from loadtest.model.io import parse_summary, summary_schema, summary_schema_bytes
from loadtest.model.verdict import FaultVerdict, Observed, RequestRow, RigObserved

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "fixtures" / "runs" / "sample" / "summary.json"
OBSERVED = {
    "cancel": CancelObserved,
    "restart": RestartObserved,
    "hook": HookObserved,
    "idle": IdleObserved,
}


def test_each_kinds_observations_are_in_the_entry_and_the_schema_not_in_rig_observed() -> None:
    # What every kind may set stays shared: the shared judge reads it.
    assert set(get_type_hints(RigObserved)) == {"skipped", "error"}
    static = set(get_type_hints(Observed)) | set(get_type_hints(FaultVerdict))
    made = fault_entry()
    hints = get_type_hints(made)
    schema = summary_schema()["$defs"]["FaultVerdict"]
    for kind, model in OBSERVED.items():
        assert observed_model(kind, fault_kind(kind)) is model
        for key, hint in get_type_hints(model).items():
            assert key not in static, key  # declared by the kind alone
            assert hints[key] == hint and key in vars(made)["__optional_keys__"], key
            assert key in schema["properties"] and key not in schema["required"], key
            assert key in observed_keys(), key  # copied from Observed into the entry
    # The type comes from the kind's declaration: settled_s may be null, burst is an int.
    assert schema["properties"]["settled_s"] == {"anyOf": [{"type": "number"}, {"type": "null"}]}
    assert schema["properties"]["burst"] == {"type": "integer"}
    # Planned edges are measured by the entry; not_reached becomes its verdict.
    assert not {"start_s", "end_s", "not_reached"} & observed_keys()
    assert {"skipped", "error", "detail"} <= observed_keys()
    assert summary_schema_bytes() == (ROOT / "docs" / "summary.schema.json").read_bytes()


def _rows() -> list[RequestRow]:
    """A request every 100 ms for 30 s, each answered in 100 ms."""
    return [
        {
            "sent_ms": i * 100.0,
            "end_ms": i * 100.0 + 100,
            "first_token_ms": i * 100.0 + 10,
            "ttft_ms": 10.0,
            "tpot_ms": 5.0,
            "outcome": "ok",
            "error_class": None,
            "warmup": False,
        }
        for i in range(300)
    ]


def _summary_with(entry: FaultVerdict) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(SAMPLE.read_bytes())
    data["faults"] = [orjson.loads(orjson.dumps(entry))]
    return data


def test_a_kinds_observations_reach_its_entry_and_are_read_back_typed() -> None:
    ev = FaultEvent(kind="restart", at_s=10, duration_s=5)
    obs: Observed = {"start_s": 10.0}
    seen = top_observed(obs, RestartObserved)  # the same dict, typed as the kind's
    assert id(seen) == id(obs)
    seen |= {"stopped_s": 10.1, "spawned_s": 10.1, "ready_s": 12.0, "time_to_ready_s": 1.9}
    (entry,) = judge_windows(FaultPlan(events=(ev,)), [obs], _rows(), [])
    assert seen.items() <= entry.items()  # copied as they are
    data = _summary_with(entry)
    (back,) = parse_summary(data)["faults"]
    assert top_figures(back, RestartObserved)["time_to_ready_s"] == 1.9
    data["faults"][0]["time_to_ready_s"] = "slow"
    wrong = r"Expected `float`, got `str` - at `\$\.faults\[0\]\.time_to_ready_s`"
    with pytest.raises(ResultFileError, match=wrong):
        parse_summary(data)


async def test_a_kinds_inject_writes_its_observations_through_its_model() -> None:
    hook = FaultEvent(kind="hook", at_s=0, duration_s=0.01, spec=HookSpec(command="true"))
    idle = FaultEvent(kind="idle", at_s=0, duration_s=0.01, spec=IdleSpec(burst=4))
    plan = FaultPlan(events=(hook, idle))
    rig = FaultRig(plan)
    for ev, obs in zip(plan.events, rig.observed, strict=True):
        await fault_kind(ev.kind).inject(ev, obs, rig)
    h, i = judge_windows(plan, rig.observed, _rows(), [])
    assert top_figures(h, HookObserved)["start_action"]["exit"] == 0
    assert "end_action" not in h  # no end action asked
    assert top_figures(i, IdleObserved)["burst"] == 4
    assert "burst" not in h and "start_action" not in i  # each window, its kind's keys


class _Error(TypedDict, total=False):
    error: int


def test_a_kind_without_observations_loads_and_a_wrong_declaration_is_named() -> None:
    class Bare:  # a kind written before observed_model, no FaultKindBase
        pass

    class Wrong(FaultKindBase):
        observed_model = dict

    assert observed_model("bare", Bare()) is None
    assert observed_model("plain", FaultKindBase()) is None
    assert observed_model("draft_down", fault_kind("draft_down")) is None  # skipped is shared
    with pytest.raises(UsageError, match=r"fault kind 'wrong' declares observed_model"):
        observed_model("wrong", Wrong())
    # A kind's key named like one every entry has is refused, as a figure is.
    with pytest.raises(UsageError, match=r"'blip'.*'error', a field every faults entry has"):
        entry_type([("blip", _Error)])
