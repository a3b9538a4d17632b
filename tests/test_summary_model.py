"""summary.json through the typed model: its published schema, and errors on bad files."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from loadtest.errors import ResultFileError
from loadtest.model.io import (
    decision_schema_bytes,
    load_summary,
    parse_summary,
    summary_schema_bytes,
)
from loadtest.model.verdict import STATE_OF, VerdictState

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "docs" / "summary.schema.json"
SAMPLE = ROOT / "fixtures" / "runs" / "sample" / "summary.json"
# LOADTEST_UPDATE_SCHEMA=1 rewrites the published schema (after a deliberate model change).
UPDATE = os.environ.get("LOADTEST_UPDATE_SCHEMA") == "1"


@pytest.mark.parametrize(
    ("schema", "fresh"),
    [
        (SCHEMA, summary_schema_bytes),
        (ROOT / "docs" / "decision.schema.json", decision_schema_bytes),
    ],
)
def test_the_published_schema_is_the_one_the_model_generates(
    schema: Path, fresh: Callable[[], bytes]
) -> None:
    if UPDATE:
        schema.write_bytes(fresh())
    assert schema.read_bytes() == fresh(), f"{schema} is stale; see LOADTEST_UPDATE_SCHEMA"


def test_an_older_summary_still_loads() -> None:
    s = load_summary(SAMPLE.parent)  # a run folder works as well as the file
    assert s["run"]["scenario"] and s["requests"]["sent"] > 0
    assert "driver" not in s  # written before the driver was judged


def test_a_bad_summary_names_the_file_and_the_field(tmp_path: Path) -> None:
    data = orjson.loads(SAMPLE.read_bytes())
    data["requests"]["sent"] = "many"
    bad = tmp_path / "summary.json"
    (tmp_path / ".invalid-on-purpose").touch()  # not for the suite's schema check
    bad.write_bytes(orjson.dumps(data))
    with pytest.raises(ResultFileError) as err:
        load_summary(bad)
    assert str(bad) in str(err.value) and "$.requests.sent" in str(err.value)
    data["requests"]["sent"] = 1
    del data["run"]
    with pytest.raises(ResultFileError, match=r"missing required field `run`"):
        parse_summary(data, "memory")
    bad.write_bytes(b"{not json")
    with pytest.raises(ResultFileError, match="not JSON"):
        load_summary(bad)
    with pytest.raises(ResultFileError, match="cannot read"):
        load_summary(tmp_path / "absent.json")


def test_every_verdict_word_is_one_of_four_states() -> None:
    states: set[VerdictState] = {"positive", "negative", "inconclusive", "not_exercised"}
    assert set(STATE_OF.values()) == states
    for word in ("held", "degraded", "failed", "skipped", "met", "missed", "kept_up", "busy"):
        assert STATE_OF[word] in states
