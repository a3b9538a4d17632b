"""A fault kind's own typed figures: declared in its module, in summary.json's schema and
checked when a summary is read back, with no field of theirs in ``model/verdict.py``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, TypedDict, get_type_hints

import orjson
import pytest

from loadtest.errors import ResultFileError, UsageError
from loadtest.features.faults.block import FAULTS
from loadtest.features.faults.entry import entry_type, fault_entry, figures_model
from loadtest.features.faults.kind import FaultKindBase, fault_kind
from loadtest.features.faults.kinds.cancel import CancelFigures, CancelSpec
from loadtest.features.faults.kinds.restart import RestartFigures
from loadtest.features.faults.kinds.toxics import ToxicFigures
from loadtest.features.faults.own_figures import top_figures
from loadtest.features.faults.plan import FaultEvent, FaultPlan
from loadtest.features.faults.registry import fault_kinds
from loadtest.features.faults.verdict import judge_windows
from loadtest.model.blocks import extends
from loadtest.model.io import parse_summary, summary_schema, summary_schema_bytes
from loadtest.model.verdict import FaultVerdict, RequestRow
from loadtest.registry import DISABLE_ENV
from tests.conftest import plugin_site

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "fixtures" / "runs" / "sample" / "summary.json"
OWN = {"cancel": CancelFigures, "restart": RestartFigures, "draft_down": ToxicFigures}


def test_each_kinds_figures_are_in_the_schema_and_none_in_the_shared_model() -> None:
    shared = set(get_type_hints(FaultVerdict))
    schema = summary_schema()
    entry = schema["$defs"]["FaultVerdict"]
    for kind, model in OWN.items():
        assert figures_model(kind, fault_kind(kind)) is model
        for key in get_type_hints(model):
            assert key not in shared, key
            assert key in entry["properties"] and key not in entry["required"], key
    # Declared by the kinds, the schema is the one published when the model named them:
    # one FaultVerdict, its name and description as before.
    assert entry["title"] == "FaultVerdict" and entry["description"] == FaultVerdict.__doc__
    assert summary_schema_bytes() == (ROOT / "docs" / "summary.schema.json").read_bytes()


def _rows() -> list[RequestRow]:
    """A request every 100 ms for 30 s, the ones in 10-15 s cancelled on purpose."""
    rows: list[RequestRow] = []
    for i in range(300):
        t = i * 100.0
        cut = 10_000 <= t < 15_000 and i % 2 == 0
        rows.append(
            {
                "sent_ms": t,
                "end_ms": t + 100,
                "first_token_ms": t + 10,
                "ttft_ms": 10.0,
                "tpot_ms": 5.0,
                "outcome": "cancelled" if cut else "ok",
                "error_class": None,
                "warmup": False,
                "injected_cancel": cut,
                "cancel_close_ms": 2.0 if cut else None,
            }
        )
    return rows


def _summary_with(entry: FaultVerdict) -> dict[str, Any]:
    data: dict[str, Any] = orjson.loads(SAMPLE.read_bytes())
    data["faults"] = [orjson.loads(orjson.dumps(entry))]
    return data


def test_a_kinds_figures_are_read_back_typed_and_a_wrong_type_is_named() -> None:
    spec = CancelSpec(fraction=0.5, after_tokens=5)
    ev = FaultEvent(kind="cancel", at_s=10, duration_s=5, spec=spec)
    (entry,) = judge_windows(FaultPlan(events=(ev,)), [{}], _rows(), [])
    own = top_figures(entry, CancelFigures)  # the entry itself, typed as the kind's
    assert id(own) == id(entry)
    assert own["injected_cancels"] == 25
    assert own["cancel_close_p50_ms"] == own["cancel_close_max_ms"] == 2.0
    data = _summary_with(entry)
    (back,) = parse_summary(data)["faults"]
    assert top_figures(back, CancelFigures)["injected_cancels"] == 25  # kept, typed
    data["faults"][0]["injected_cancels"] = "25"
    wrong = r"Expected `int`, got `str` - at `\$\.faults\[0\]\.injected_cancels`"
    with pytest.raises(ResultFileError, match=wrong):
        parse_summary(data)
    data["faults"][0] |= {"injected_cancels": 25, "cancel_close_p50_ms": "fast"}
    with pytest.raises(ResultFileError, match=r"`\$\.faults\[0\]\.cancel_close_p50_ms`"):
        parse_summary(data)
    # Why a plugin's figures are safer in detail: a key no installed kind declares is
    # not kept when summary.json is read, where detail keeps whatever it holds.
    data["faults"][0] |= {"cancel_close_p50_ms": 2.0, "sent_in_pause": 3, "detail": {"n": 1}}
    (back,) = parse_summary(data)["faults"]
    assert "sent_in_pause" not in back and back["detail"] == {"n": 1}


def test_the_faults_block_extends_the_typed_field_readers_use() -> None:
    assert extends(FAULTS.model, list[FaultVerdict])
    assert not extends(list[FaultVerdict], FAULTS.model)  # the kinds' figures missing

    class Shorter(TypedDict):
        name: str

    class Retyped(TypedDict):
        name: int

    assert not extends(list[Shorter], list[FaultVerdict])
    assert not extends(Retyped, Shorter)
    assert not extends(dict[str, Shorter], list[Shorter])


class _Own(TypedDict, total=False):
    blips: int


class _Verdict(TypedDict, total=False):
    verdict: str


class _Blips(TypedDict, total=False):
    blips: float


def test_a_kinds_figures_are_optional_and_clashes_are_named() -> None:
    made = entry_type([("blip", _Own)])
    assert "blips" in vars(made)["__optional_keys__"]
    assert made.__name__ == "FaultVerdict" and made.__doc__ == FaultVerdict.__doc__
    # Kinds of one class share their figures (the five proxy toxics: fallbacks).
    toxics = [n for n in fault_kinds() if n.startswith("draft_")]
    assert len(toxics) == 5
    assert all(figures_model(n, fault_kind(n)) is ToxicFigures for n in toxics)
    assert "fallbacks" in get_type_hints(fault_entry())
    assert "blips" in get_type_hints(entry_type([("a", _Own), ("b", _Own)]))
    with pytest.raises(UsageError, match=r"'blip'.*'verdict', a field every faults entry has"):
        entry_type([("blip", _Verdict)])
    with pytest.raises(UsageError, match=r"'a' and 'b' declare the figure 'blips'"):
        entry_type([("a", _Own), ("b", _Blips)])


def test_a_kind_without_figures_still_loads_and_a_wrong_declaration_is_named() -> None:
    class Bare:  # a kind written before figures_model, no FaultKindBase
        pass

    class Wrong(FaultKindBase):
        figures_model = int

    assert figures_model("bare", Bare()) is None
    assert figures_model("plain", FaultKindBase()) is None
    with pytest.raises(UsageError, match=r"fault kind 'wrong' declares figures_model"):
        figures_model("wrong", Wrong())


_BROKEN_KIND = """
class _NotAKind:
    keys = {}


BROKEN = _NotAKind()
"""


def test_a_broken_plugin_kind_is_left_out_of_the_entries_and_summaries_still_read(
    tmp_path: Path,
) -> None:
    # A fault kind that does not fit fails the run whose plan names it; reading, writing
    # and printing a summary of any other run must go on, without that kind's figures.
    site = plugin_site(
        tmp_path, "broken_kind", "loadtest.faults", "wobble = broken_kind:BROKEN", _BROKEN_KIND
    )
    run = tmp_path / "sample"
    shutil.copytree(ROOT / "fixtures" / "runs" / "sample", run)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    env.pop(DISABLE_ENV, None)
    read = (
        "from loadtest.model.io import load_summary\n"
        f"s = load_summary({str(run)!r})\n"
        "print([f.get('injected_cancels') for f in s['faults'] if f['kind'] == 'cancel'])\n"
    )
    for argv in (["-c", read], ["-m", "loadtest", "report", str(run)]):
        done = subprocess.run(
            [sys.executable, *argv], capture_output=True, text=True, timeout=120, env=env
        )
        assert done.returncode == 0, done.stderr
        assert "fault kind wobble left out of the faults entries" in done.stderr
    assert (run / "report.html").stat().st_size > 0
    # The kinds that load keep their figures, read back typed.
    first = subprocess.run(
        [sys.executable, "-c", read], capture_output=True, text=True, timeout=120, env=env
    )
    assert first.stdout.strip() == "[18]", first.stdout
