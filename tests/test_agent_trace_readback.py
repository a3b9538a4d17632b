"""A run read back: ``export-trace --format otlp``, and a killed replay's summary rebuilt.

The shipped trace (made by the official instrumentation) is replayed against the
built-in simulator, the run exported, and the export read by the ``agent-trace`` source:
the same sessions, calls in the same order, the same gaps and tool time. Its shape is
checked against what the SDK's exporter wrote (``fixtures/otel-agent.jsonl``), and,
where the OpenTelemetry packages are installed, by their own OTLP JSON decoder. The
same run less its summary is a killed run: ``summarize`` rebuilds its ``agent_trace``
section from the request lines.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadtest.app.run.export_trace import FORMATS, export_trace
from loadtest.cli.main import main
from loadtest.datasets.otel import read_agent_trace
from loadtest.errors import UsageError
from loadtest.model.io import load_summary
from loadtest.report.rebuild import rebuild_summary
from loadtest.report.run_sessions import run_sessions
from tests.test_agent_trace import FIXTURE, LAG_BOUND_MS, documents, spans_of, write_docs
from tests.test_multiturn import CONVS

ROOT = Path(__file__).resolve().parent.parent
SIM = "[sim]\nttft_ms = 10.0\nitl_ms = 4.0\nttft_sigma = 0.1\nitl_sigma = 0.1\n"
NS_ROUNDING = 2_000
"""The run's lines hold ms to 0.1 µs and the replay's gaps to 1 µs."""


def _run(tmp: Path, scenario: str, *flags: str) -> Path:
    path = tmp / "s.toml"
    path.write_text(scenario)
    out = tmp / "out"
    assert main(["run", str(path), "--out", str(out), "--no-tui", "-q", *flags]) == 0
    (run_dir,) = out.iterdir()
    return run_dir


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The shipped trace replayed against the simulator, and its OTLP export."""
    tmp = tmp_path_factory.mktemp("replay")
    # record_prompts: the export carries what each call sent (gen_ai.input.messages).
    src = (
        'name = "otel-replay"\nrecord_prompts = true\n'
        f'[[sources]]\nkind = "agent-trace"\npath = "{FIXTURE}"\n'
    )
    run_dir = _run(tmp, src + SIM)
    assert main(["export-trace", "--format", "otlp", str(run_dir)]) == 0
    return run_dir, run_dir / "trace.otlp.jsonl"


def test_a_replay_of_an_exported_run_has_its_sessions_calls_and_gaps(
    replayed: tuple[Path, Path],
) -> None:
    _, exported = replayed
    recorded, again = read_agent_trace(FIXTURE), read_agent_trace(exported)
    assert len(again) == len(recorded) == 3
    for was, now in zip(recorded, again, strict=True):
        assert now.offset_ns == pytest.approx(was.offset_ns, abs=NS_ROUNDING)
        assert len(now.calls) == len(was.calls) == 4
        assert now.tools == was.tools  # one execute_tool span per gap that had tools
        for c, d in zip(was.calls, now.calls, strict=True):
            assert d.output_tokens == c.output_tokens
            if c.messages is None:  # cut to the recorded length exactly
                assert d.input_tokens == c.input_tokens
            else:  # sent as recorded, and exported as sent
                assert d.messages == c.messages
            assert d.messages is not None
            assert d.settings == c.settings == {"temperature": 0.7}
            assert d.gap_ns == pytest.approx(c.gap_ns, abs=NS_ROUNDING)
            assert d.tool_ns == pytest.approx(c.tool_ns, abs=NS_ROUNDING)
    # The session's own spans nest under one invoke_agent span per trace.
    docs = documents(exported)
    assert len(docs) == 3
    for doc in docs:
        spans = spans_of([doc])
        (agent,) = [s for s in spans if s["name"].startswith("invoke_agent")]
        assert "parentSpanId" not in agent
        assert {s["traceId"] for s in spans} == {agent["traceId"]}
        assert all(s["parentSpanId"] == agent["spanId"] for s in spans if s is not agent)
        source = _attrs(agent)["loadtest.session.key"]
        assert source in {s.trace_id for s in recorded}


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span["attributes"]}


def _value_kinds(spans: list[dict[str, Any]]) -> dict[tuple[str, str], str]:
    """(operation, attribute) -> the AnyValue field it is written in."""
    out = {}
    for s in spans:
        op = _attrs(s)["gen_ai.operation.name"]
        for a in s["attributes"]:
            out[op, a["key"]] = next(iter(a["value"]))
    return out


def test_the_export_has_the_shape_the_sdk_exporter_writes(replayed: tuple[Path, Path]) -> None:
    _, exported = replayed
    ours, theirs = documents(exported), documents(FIXTURE)
    for doc in ours:
        assert set(doc) == {"resourceSpans"}
        for rs in doc["resourceSpans"]:
            assert set(rs) == {"resource", "scopeSpans"}
            for ss in rs["scopeSpans"]:
                assert set(ss) <= {"scope", "spans", "schemaUrl"}
    mine, sdk = spans_of(ours), spans_of(theirs)
    span_keys = {k for s in sdk for k in s} - {"flags"}
    for s in mine:
        assert set(s) <= span_keys
        assert len(s["traceId"]) == 32 and len(s["spanId"]) == 16
        int(s["traceId"], 16), int(s["spanId"], 16)
        # 64-bit integers are strings in OTLP JSON.
        assert isinstance(s["startTimeUnixNano"], str) and isinstance(s["endTimeUnixNano"], str)
        assert int(s["startTimeUnixNano"]) <= int(s["endTimeUnixNano"])
    kinds = {k: {s["kind"] for s in sdk if s["name"].startswith(k)} for k in ("chat", "execute")}
    assert {s["kind"] for s in mine if s["name"].startswith("chat")} == kinds["chat"]
    assert {s["kind"] for s in mine if s["name"].startswith("execute")} == kinds["execute"]
    # Every attribute both write is written in the same AnyValue field.
    a, b = _value_kinds(mine), _value_kinds(sdk)
    shared = set(a) & set(b)
    assert {("chat", "gen_ai.usage.input_tokens"), ("chat", "gen_ai.request.temperature")} <= shared
    assert {k: a[k] for k in shared} == {k: b[k] for k in shared}


@pytest.mark.skipif(
    importlib.util.find_spec("opentelemetry.proto_json") is None,
    reason="the dev extra's OpenTelemetry packages are not installed",
)
def test_the_official_otlp_json_decoder_reads_the_export_back_unchanged(
    replayed: tuple[Path, Path],
) -> None:
    from opentelemetry.proto_json.collector.trace.v1.trace_service import (
        ExportTraceServiceRequest,
    )

    _, exported = replayed
    for doc in documents(exported):
        assert ExportTraceServiceRequest.from_dict(doc).to_dict() == doc
    # The decoder is strict enough to fail: a span id that is not hex.
    bad = documents(exported)[0]
    spans_of([bad])[0]["spanId"] = "not hex"
    with pytest.raises(ValueError, match="hex"):
        ExportTraceServiceRequest.from_dict(bad)


def test_agent_tasks_export_their_tools_by_name(tmp_path: Path) -> None:
    sessions = ROOT / "scenarios" / "data" / "agent-sessions.jsonl"
    run_dir = _run(
        tmp_path,
        'name = "agents"\nmax_tokens = 24\n[agent]\ntool = "fixed"\ntool_ms = 5\n'
        f'[[tasks]]\nkind = "agent-jsonl"\npath = "{sessions}"\n'
        "[load]\nconcurrency = 2\nrequests = 3\n"
        "[sim]\nagent_steps = 2\nttft_ms = 3.0\nitl_ms = 0.5\n",
    )
    exported = export_trace(run_dir, fmt="otlp")
    events = orjson.loads((run_dir / "trace.json").read_bytes())
    tool_names = sorted(e["name"] for e in events if e.get("cat") == "tool")
    spans = spans_of(documents(exported))
    assert tool_names
    assert sorted(_attrs(s)["gen_ai.tool.name"] for s in spans if "execute_tool" in s["name"]) == (
        tool_names
    )
    requests = [orjson.loads(x) for x in (run_dir / "requests.jsonl").read_bytes().splitlines()]
    sessions_back = read_agent_trace(exported)
    assert len(sessions_back) == 3
    assert sum(len(s.calls) for s in sessions_back) == len(requests)
    assert all(c.tool_ns > 0 for s in sessions_back for c in s.calls[1:])


def test_plain_requests_are_a_trace_each_and_failed_calls_are_not_replayed(
    tmp_path: Path,
) -> None:
    run_dir = _run(
        tmp_path,
        'name = "plain"\nmax_tokens = 8\n[[sources]]\nkind = "inline"\n'
        'prompts = ["a", "b", "c"]\n[load]\nconcurrency = 2\nrequests = 6\n',
    )
    exported = export_trace(run_dir, tmp_path / "x.jsonl", "otlp")
    docs = documents(exported)
    assert len(docs) == 6
    assert all(s["name"] == "chat sim-llm" for s in spans_of(docs))
    assert len(read_agent_trace(exported)) == 6
    # A call that failed (status ERROR, no usage) stays as time in the gap, not a call.
    docs = documents(FIXTURE)
    spans = spans_of(docs)
    chats = sorted(
        (s for s in spans if s["name"].startswith("chat ")), key=lambda s: s["startTimeUnixNano"]
    )
    victim = chats[1]
    victim["status"] = {"code": 2, "message": "HTTP 503"}
    victim["attributes"] = [a for a in victim["attributes"] if "usage" not in a["key"]]
    was = read_agent_trace(FIXTURE)
    now = read_agent_trace(write_docs(tmp_path, docs))
    hit = next(s for s in now if s.trace_id == victim["traceId"])
    before = next(s for s in was if s.trace_id == victim["traceId"])
    assert len(hit.calls) == 3
    assert hit.calls[1].gap_ns > before.calls[1].gap_ns + before.calls[2].gap_ns
    with pytest.raises(UsageError, match="--format 'perfetto'"):
        export_trace(run_dir, fmt="perfetto")
    for name, form in FORMATS.items():  # the command line offers every format
        assert main(["export-trace", "--format", name, str(run_dir)]) == 0
        assert (run_dir / form.default_name).stat().st_size > 0


def _killed_copy(run: Path, tmp: Path) -> Path:
    folder = tmp / run.name
    shutil.copytree(run, folder, ignore=shutil.ignore_patterns("summary.*", "*.hgrm", "trace.*"))
    return folder


def test_a_killed_replay_rebuilds_its_time_split_from_the_lines(
    replayed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir, _ = replayed
    own = load_summary(run_dir)["agent_trace"]
    folder = _killed_copy(run_dir, tmp_path)
    capsys.readouterr()
    assert main(["summarize", str(folder)]) == 0
    assert "decode holds" in capsys.readouterr().out  # the split is printed, as a run's
    rebuilt = load_summary(folder)
    block = rebuilt["agent_trace"]
    # The same figures (the lines hold ms to 0.1 µs, the run summed ns).
    assert _same(block, own), (block, own)
    notes = rebuilt["rebuilt"]["not_rebuilt"]
    assert any(n.startswith("agent_trace: rebuilt from the lines") for n in notes)
    # Killed before one session's last call ended: that session is not counted.
    cut = _killed_copy(run_dir, tmp_path / "cut")
    lines = (cut / "requests.jsonl").read_bytes().splitlines(keepends=True)
    last = orjson.loads(lines[-1])
    (cut / "requests.jsonl").write_bytes(b"".join(lines[:-1]))
    part = rebuild_summary(cut).summary
    assert part["agent_trace"]["completed"] == 2
    assert last["trace_id"] not in {r["trace_id"] for r in part["agent_trace"]["sessions"]}
    assert any("1 session(s) cut short" in n for n in part["rebuilt"]["not_rebuilt"])


def _same(a: Any, b: Any) -> bool:
    """Equal, numbers to 0.01 (nested dicts and lists, which approx does not walk)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) <= 0.01
    return bool(a == b)


def test_conversations_export_as_sessions_of_turns_after_the_think_time(tmp_path: Path) -> None:
    convs = tmp_path / "convs.jsonl"
    convs.write_bytes(b"".join(orjson.dumps(c) + b"\n" for c in CONVS))
    run_dir = _run(
        tmp_path,
        'name = "chat"\nmax_tokens = 8\n[[sources]]\nkind = "conversations"\n'
        f'path = "{convs}"\nthink_time_ms = 30\n[load]\nconcurrency = 3\nrequests = 3\n',
    )
    exported = export_trace(run_dir, fmt="otlp")
    sessions = read_agent_trace(exported)
    assert sorted(len(s.calls) for s in sessions) == [3, 3, 3]
    for s in sessions:
        assert s.tools == 0
        for c in s.calls[1:]:
            # The user's think time between an answer and the next turn is the gap.
            assert 30e6 - NS_ROUNDING <= c.gap_ns < 30e6 + LAG_BOUND_MS * 1e6
    kinds = {
        _attrs(x)["loadtest.session.kind"]
        for x in spans_of(documents(exported))
        if x["name"].startswith("invoke_agent")
    }
    assert kinds == {"conversation"}


def test_two_workers_unit_0_of_one_trace_are_two_sessions(tmp_path: Path) -> None:
    # Each worker numbers its units from 0: grouped by trace id and unit alone, the
    # merged lines of a two-worker replay made one session of both workers' calls.
    lines = [
        {"index": i, "trace_id": "t1", "unit": 0, "call": i // 2, "worker": i % 2,
         "intended_ms": 10.0 * i, "sent_ms": 10.0 * i, "end_ms": 10.0 * i + 5,
         "outcome": "ok", "output_tokens": 3, "prompt_id": f"t1/{i // 2}"}
        for i in range(4)
    ]  # fmt: skip
    (tmp_path / "requests.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in lines))
    sessions = run_sessions(tmp_path)
    assert [(s.key, s.worker, len(s.calls)) for s in sessions] == [("t1", 0, 2), ("t1", 1, 2)]
