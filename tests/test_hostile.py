"""Every misbehaviour of the hostile endpoint: no crash, the right class, nothing lost.

Each case is a whole ``loadtest run`` (``run_job``): scenario file, client, accounting
and the files on disk, against ``tests/hostile.py`` on loopback.
"""

from __future__ import annotations

import itertools
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from loadtest.app.run.job import RunOptions, run_job
from loadtest.datasets.tokenizer import EndpointTokenizer
from loadtest.errors import DatasetError
from loadtest.model.summary import Summary
from tests.conftest import log_records, read_jsonl
from tests.hostile import ECHO_MODES, METRICS_KEY, TOKENIZE_ANSWERS, HostileServer

SCENARIO = """
name = "hostile"
max_tokens = 8
api = "{api}"

[[sources]]
kind = "inline"
category = "chat"
prompts = ["one", "two", "three"]

[load]
mode = "closed"
concurrency = {concurrency}
requests = {requests}
grace_s = 5

[timeouts]
connect_s = 0.5
first_byte_s = 1.0
between_chunks_s = 1.0
total_s = 2.5
"""

# mode -> (outcome, error_class, a fragment of the error message)
EXPECTED: dict[str, tuple[str, str | None, str]] = {
    "ok": ("ok", None, ""),
    "invalid-json": ("failed", "protocol", "not JSON"),
    "no-data-prefix": ("failed", "protocol", "no `data:` events"),
    "no-done": ("ok", None, ""),
    "truncated": ("failed", "disconnected", "before [DONE]"),
    "huge-line": ("failed", "protocol", "exceeds 1048576 bytes"),
    "binary": ("failed", "protocol", ""),
    "wrong-type": ("failed", "protocol", "text/html"),
    "html-as-sse": ("failed", "protocol", "no `data:` events"),
    "empty-stream": ("failed", "disconnected", "before [DONE]"),
    "cut-mid-event": ("failed", "disconnected", "before [DONE]"),
    # It said "the stream had 0 lines but no `data:` events; is it SSE?".
    "unterminated-data": (
        "failed",
        "protocol",
        "the stream ended inside its first line (40 bytes, no line end), so it held no "
        """event; it began 'data: {"id":"hostile-1","object":"chat.c'""",
    ),
    "not-object": ("failed", "protocol", "not a JSON object"),
    "error-event": ("failed", "server_error", "model overloaded"),
    "error-in-chunk": ("failed", "server_error", "OOM"),
    "rate-limited": ("failed", "rate_limited", "HTTP 429"),
    "http-500": ("failed", "http_5xx", "HTTP 500"),
    "http-503": ("failed", "http_5xx", "HTTP 503"),
    "slowloris": ("failed", "timeout", "total timeout"),
    "reset": ("failed", "disconnected", ""),
    "endless": ("failed", "timeout", "total timeout"),
    "stall": ("failed", "timeout", "between chunks timeout"),
    "double-done": ("ok", None, ""),
    "gzip": ("ok", None, ""),
    "redirect": ("failed", "redirect", "/ok/v1/chat/completions"),
}


@pytest.fixture(scope="module")
def hostile() -> Iterator[HostileServer]:
    with HostileServer() as server:
        yield server


# The Responses API's event stream, broken the same ways (scenario api = "responses").
RESPONSES_EXPECTED: dict[str, tuple[str, str | None, str]] = {
    "resp-ok": ("ok", None, ""),
    "resp-truncated": ("failed", "disconnected", "before response.completed"),
    "resp-error-event": ("failed", "server_error", "model overloaded"),
    "resp-failed": ("failed", "server_error", "KV cache OOM"),
    "resp-unknown-events": ("ok", None, ""),
    "invalid-json": ("failed", "protocol", "not JSON"),
    "wrong-type": ("failed", "protocol", "text/html"),
    "html-as-sse": ("failed", "protocol", "no `data:` events"),
    "empty-stream": ("failed", "disconnected", "before response.completed"),
    "cut-mid-event": ("failed", "disconnected", "before response.completed"),
    "not-object": ("failed", "protocol", "not a JSON object"),
    "stall": ("failed", "timeout", "between chunks timeout"),
    "http-503": ("failed", "http_5xx", "HTTP 503"),
}


def _scenario(tmp: Path, requests: int = 4, concurrency: int = 4, api: str = "chat") -> str:
    path = tmp / "hostile.toml"
    path.write_text(SCENARIO.format(requests=requests, concurrency=concurrency, api=api))
    return str(path)


def _run(tmp: Path, endpoint: str, **kw: Any) -> tuple[Summary, list[dict[str, Any]]]:
    requests = kw.pop("requests", 4)
    concurrency = kw.pop("concurrency", 4)
    api = kw.pop("api", "chat")
    options = RunOptions(
        scenario=_scenario(tmp, requests, concurrency, api),
        endpoint=endpoint,
        model="hostile-llm",
        out=str(tmp / "out"),
        tui=False,
        **kw,
    )
    summary, run_dir, interrupted = run_job(options)
    assert not interrupted
    rows = read_jsonl(run_dir / "requests.jsonl")
    # Every request is accounted for, once, in the summary and on disk.
    assert len(rows) == requests == summary["requests"]["sent"]
    assert sorted(r["index"] for r in rows) == list(range(requests))
    on_disk = orjson.loads((run_dir / "summary.json").read_bytes())
    assert on_disk["requests"] == summary["requests"]
    assert (run_dir / "summary.csv").exists() and (run_dir / "histograms.hlog").exists()
    return summary, rows


@pytest.mark.parametrize("mode", list(EXPECTED))
def test_each_misbehaviour_gets_its_class(
    mode: str, hostile: HostileServer, tmp_path: Path
) -> None:
    outcome, error_class, fragment = EXPECTED[mode]
    summary, rows = _run(tmp_path, hostile.url(mode))
    for row in rows:
        assert row["outcome"] == outcome, row
        assert row["error_class"] == error_class, row
        assert fragment in (row["error"] or ""), row
    counts = summary["requests"]
    assert counts["ok" if outcome == "ok" else "failed"] == len(rows)


@pytest.mark.parametrize("mode", list(RESPONSES_EXPECTED))
def test_each_responses_misbehaviour_gets_its_class(
    mode: str, hostile: HostileServer, tmp_path: Path
) -> None:
    outcome, error_class, fragment = RESPONSES_EXPECTED[mode]
    summary, rows = _run(tmp_path, hostile.url(mode), api="responses")
    for row in rows:
        assert row["outcome"] == outcome, row
        assert row["error_class"] == error_class, row
        assert fragment in (row["error"] or ""), row
    if mode == "resp-unknown-events":
        # Only the text deltas are tokens; usage came from response.completed.
        assert all(r["token_chunks"] == 2 and r["output_tokens"] == 3 for r in rows), rows
    if mode in ("resp-truncated", "resp-error-event", "resp-failed"):
        assert all(r["token_chunks"] >= 1 for r in rows), rows  # tokens before the break
    assert summary["requests"]["ok" if outcome == "ok" else "failed"] == len(rows)


def test_the_printed_table_says_what_each_class_of_failure_was(
    hostile: HostileServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose every request got a web page printed only ``errors: protocol 2043``:
    what came back was in requests.jsonl alone. The table now says it, once."""
    _run(tmp_path, hostile.url("wrong-type"), requests=6)
    out = " ".join(capsys.readouterr().out.split())  # wrapped at 80 columns
    assert "errors: protocol 6" in out
    said = "most common protocol error (6 of 6): expected text/event-stream, got content type"
    assert out.count(said) == 1, out
    assert f"{said} 'text/html'" in out


def test_retry_after_is_recorded_and_a_session_waits_it_out(
    hostile: HostileServer, tmp_path: Path
) -> None:
    _, rows = _run(tmp_path, hostile.url("rate-limited"), requests=3, concurrency=1)
    assert [r["retry_after_s"] for r in rows] == [1.0, 1.0, 1.0]
    sent = sorted(r["sent_ms"] for r in rows)
    # One session: each send waits out the previous answer's Retry-After of 1 s.
    assert all(b - a >= 990 for a, b in itertools.pairwise(sent))


def test_self_signed_tls_is_refused_by_default(hostile: HostileServer, tmp_path: Path) -> None:
    _, rows = _run(tmp_path, hostile.url("ok", tls=True))
    assert {r["error_class"] for r in rows} == {"tls"}
    assert "--ca-bundle" in rows[0]["error"]


def test_tls_with_the_ca_bundle_is_verified_and_works(
    hostile: HostileServer, tmp_path: Path
) -> None:
    ca = hostile.ca_file(tmp_path)
    summary, _ = _run(tmp_path, hostile.url("ok", tls=True), ca_bundle=ca)
    assert summary["requests"]["ok"] == 4


def test_tls_insecure_must_be_asked_for_and_works(hostile: HostileServer, tmp_path: Path) -> None:
    with log_records("loadtest") as records:
        summary, _ = _run(tmp_path, hostile.url("ok", tls=True), insecure=True)
    assert summary["requests"]["ok"] == 4
    # A warning of the loadtest logger: on stderr for the CLI (and, with no logging set
    # up, through Python's last-resort handler); a handler on the logger catches it here.
    assert any("NOT verified" in r.getMessage() and r.levelname == "WARNING" for r in records)


def test_connect_timeout_is_enforced(tmp_path: Path) -> None:
    # A listener that never accepts, its backlog filled: later SYNs go unanswered.
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(0)
    port = lsock.getsockname()[1]
    fillers = []
    for _ in range(4):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        fillers.append(s)
    try:
        _, rows = _run(tmp_path, f"http://127.0.0.1:{port}")
    finally:
        for s in fillers:
            s.close()
        lsock.close()
    assert {r["error_class"] for r in rows} <= {"timeout", "connect"}
    assert any(r["error_class"] == "timeout" for r in rows), rows


@pytest.mark.parametrize("mode", ECHO_MODES)
def test_an_echoed_api_key_never_reaches_an_output(
    mode: str,
    hostile: HostileServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from loadtest.cli.main import main

    key = "sk-hostile-test-4f9a1c77e2"
    key_file = tmp_path / "key.txt"
    key_file.write_text(key + "\n")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    out = tmp_path / "out"
    argv = ["run", _scenario(tmp_path), "--endpoint", hostile.url(mode), "--model", "m"]
    code = main([*argv, "--api-key-file", str(key_file), "--no-tui", "--out", str(out)])
    assert code == 1  # every request was refused: the run measured nothing, and says so
    printed = capsys.readouterr()
    assert key not in printed.out and key not in printed.err
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) >= 4
    for path in files:
        assert key.encode() not in path.read_bytes(), path
    (run_dir,) = out.iterdir()
    rows = read_jsonl(run_dir / "requests.jsonl")
    # The server did echo it: loadtest redacted it.
    assert all("[redacted]" in r["error"] for r in rows), rows


def test_the_scrape_honours_the_runs_tls(hostile: HostileServer, tmp_path: Path) -> None:
    """``--ca-bundle`` reaches the ``/metrics`` scrape too: the server block is read."""
    ca = hostile.ca_file(tmp_path)
    summary, _ = _run(tmp_path, hostile.url("ok", tls=True), ca_bundle=ca)
    server = summary.get("server")
    assert server is not None and server["scraped"] >= 1, server
    assert server.get("engine") == "vllm" and server.get("running_peak") == 1.0


def test_the_scrape_carries_the_runs_key(
    hostile: HostileServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that gates ``/metrics`` behind the API key is scraped with the run's key."""
    monkeypatch.setenv("HOSTILE_KEY", METRICS_KEY)
    summary, _ = _run(tmp_path, hostile.url("keyed"), api_key_env="HOSTILE_KEY")
    server = summary.get("server")
    assert server is not None and server["scraped"] >= 1, server
    # Without the key the same server gives no metrics, and the summary says why.
    (tmp_path / "nokey").mkdir()
    summary, _ = _run(tmp_path / "nokey", hostile.url("keyed"))
    server = summary.get("server")
    assert server is not None and server["scraped"] == 0
    assert "HTTP 401" in server.get("note", ""), server


# A fragment of the one-line error each broken /v1/models answer gets.
MODELS_ERRORS = {
    "models-html": "answered HTTP 200 with text/html, not JSON ('<!DOCTYPE html>",
    "models-empty": "not JSON ('an empty body')",
    "models-truncated": "not JSON",
    "models-list": "lists no model",
}


@pytest.mark.parametrize("mode", list(MODELS_ERRORS))
def test_a_broken_models_answer_is_one_clear_line_naming_the_url(
    mode: str, hostile: HostileServer, tmp_path: Path
) -> None:
    endpoint = hostile.url(mode)
    scenario = _scenario(tmp_path)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "loadtest",
            "run",
            scenario,
            "--endpoint",
            endpoint,
            "--no-tui",
            "--out",
            str(tmp_path / "out"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr
    assert f"{endpoint}/v1/models" in res.stderr
    assert MODELS_ERRORS[mode] in res.stderr


@pytest.mark.parametrize("mode", ["metrics-html", "metrics-binary", "metrics-truncated"])
def test_a_metrics_page_that_is_not_prometheus_text_is_named_and_the_run_goes_on(
    hostile: HostileServer, tmp_path: Path, mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A login page, bytes, or a page cut inside a sample at ``/metrics``: the run
    accounts every request, and the server block says why it has no figures; so does
    the printed table (it was in summary.json only)."""
    summary, rows = _run(tmp_path, hostile.url(mode))
    assert summary["requests"]["sent"] == len(rows) > 0
    assert all(r["outcome"] == "ok" for r in rows)
    server = summary.get("server")
    assert server is not None and server["scraped"] == 0, server
    assert f"{hostile.url(mode)}/metrics" in server.get("note", ""), server
    out = " ".join(capsys.readouterr().out.split())  # wrapped at 80 columns
    assert f"server metrics: none scraped: {server['note']}" in out


@pytest.mark.parametrize("mode", sorted(TOKENIZE_ANSWERS))
def test_a_broken_tokenize_answer_is_one_error_naming_the_url(
    hostile: HostileServer, mode: str
) -> None:
    """Each of /tokenize's broken answers is a DatasetError naming the URL, never a
    KeyError or a ValueError (a list of strings, objects without ids, no list)."""
    tok = EndpointTokenizer(hostile.url(mode), "hostile-llm")
    with pytest.raises(DatasetError, match=re.escape(f"{hostile.url(mode)}/tokenize")) as err:
        tok.encode("hello world")
    assert TOKENIZE_SAID.get(mode, "") in str(err.value)
    assert EndpointTokenizer(hostile.url("ok"), "hostile-llm").encode("hello world") == [0, 1]


TOKENIZE_SAID = {
    # These said only "Expecting value: line 1 column 1 (char 0)", or "HTTP Error 404".
    "tok-html": "answered HTTP 200 with text/html, not JSON ('<!DOCTYPE html><html><title>",
    "tok-empty": "answered HTTP 200 with application/json, not JSON (an empty body)",
    "tok-truncated": """not JSON ('{"tokens": [1, 2')""",
    "tok-404": "answered HTTP 404 ('<html><body>404 Not Found</body></html>')",
}
"""What the error says came back, beside the URL."""
