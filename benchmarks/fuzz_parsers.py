"""Fuzz the SSE parser and the OpenAI chunk reader: nothing may crash, hang or grow.

``python -m benchmarks.fuzz_parsers [--seconds S]`` runs coverage-guided fuzzing with atheris
when it is installed (``pip install atheris``), else hypothesis for the same time, and
prints how many inputs ran. The tests run the same targets through hypothesis for a
bounded number of examples.

The only exceptions a target may raise are the ones the client maps to an outcome
class: ``ProtocolError`` (broken bytes) and ``ServerError`` (an error the server sent).
Anything else is a bug that would surface as outcome class ``client``.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time

from loadtest.errors import ProtocolError
from loadtest.protocol.openai import ServerError, StreamReader
from loadtest.protocol.sse import SSEParser

__all__ = ["fuzz_json_chunk", "fuzz_stream"]

SMALL_LIMIT = 4096
"""The event-size limit used while fuzzing, so the limit itself gets exercised."""


def fuzz_stream(data: bytes) -> None:
    """Feed ``data`` in pieces whose sizes come from its first bytes; check invariants."""
    if not data:
        return
    cuts = data[0] % 8 + 1
    head, body = data[1 : 1 + cuts], data[1 + cuts :]
    parser, reader = SSEParser(SMALL_LIMIT), StreamReader()
    pos, n = 0, 0
    try:
        for b in head:
            size = b % 64 + 1
            for event in parser.feed(body[pos : pos + size]):
                reader.on_event(event, n)
                n += 1
            pos += size
        for event in parser.feed(body[pos:]):
            reader.on_event(event, n)
            n += 1
    except (ProtocolError, ServerError):
        return
    # Memory stays bounded by the limit, whatever came in.
    assert parser.held_bytes <= SMALL_LIMIT
    assert reader.chunks <= n
    reader.output_tokens()
    _ = reader.tool_calls
    _fuzz_json_path(head, body, (reader.chunks, reader.content_chars, reader.finish_reason))


def _fuzz_json_path(head: bytes, body: bytes, expected: tuple[object, ...]) -> None:
    """The same pieces through the client's path (``feed_json``, ``on_json_lines``):
    what the event-by-event path took, it takes."""
    parser, reader = SSEParser(SMALL_LIMIT), StreamReader()
    pos = 0
    sizes = [b % 64 + 1 for b in head] + [len(body)]
    try:
        for size in sizes:
            before, lines, count, after = parser.feed_json(body[pos : pos + size])
            reader.on_events(before, 0)
            if count:
                reader.on_json_lines(lines, count, 0)
            reader.on_events(after, 0)
            pos += size
    except (ProtocolError, ServerError) as exc:
        raise AssertionError(f"the JSON-lines path failed where events did not: {exc}") from exc
    assert (reader.chunks, reader.content_chars, reader.finish_reason) == expected


def fuzz_json_chunk(data: bytes) -> None:
    """One ``data:`` event carrying ``data`` (often JSON); the reader must not crash."""
    parser, reader = SSEParser(), StreamReader()
    try:
        for event in parser.feed(b"data: " + data.replace(b"\n", b" ") + b"\n\n"):
            reader.on_event(event, 1)
    except (ProtocolError, ServerError):
        return
    reader.output_tokens()
    _ = reader.tool_calls


def _atheris_child(libfuzzer_args: list[str]) -> None:
    import atheris

    def target(data: bytes) -> None:
        fuzz_stream(data)
        fuzz_json_chunk(data)

    # Coverage guidance over the parsers only (instrument_all takes over a minute).
    for fn in (
        SSEParser.feed,
        SSEParser._field,
        StreamReader.on_event,
        StreamReader._take,
        StreamReader._take_calls,
        StreamReader.output_tokens,
    ):
        atheris.instrument_func(fn)
    atheris.Setup([sys.argv[0], *libfuzzer_args], target)
    atheris.Fuzz()


def _with_atheris(seconds: float) -> int:
    # libFuzzer ends the process itself when its time is up, so it runs as a child and
    # its own closing line ("Done N runs in S second(s)") gives the count.
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "benchmarks.fuzz_parsers", "--atheris-child"),
            *(f"-max_total_time={int(seconds)}", "-max_len=4096", "-print_final_stats=1"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    done = re.search(r"Done (\d+) runs in (\d+) second", proc.stderr)
    if proc.returncode != 0 or done is None:
        print(proc.stderr[-4000:], file=sys.stderr)
        raise SystemExit(f"atheris found a crash or failed (exit {proc.returncode})")
    return int(done.group(1))


def _with_hypothesis(seconds: float) -> int:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    runs = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:

        @settings(
            max_examples=2000,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(st.binary(max_size=4096))
        def target(data: bytes) -> None:
            nonlocal runs
            runs += 1
            fuzz_stream(data)
            fuzz_json_chunk(data)

        target()
    return runs


def main() -> None:
    """Fuzz for ``--seconds`` and print the engine and the number of inputs."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--engine", choices=("auto", "atheris", "hypothesis"), default="auto")
    ap.add_argument("--atheris-child", action="store_true", help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args()
    if args.atheris_child:
        _atheris_child(rest)
        return
    engine = args.engine
    if engine == "auto":
        try:
            import atheris  # noqa: F401

            engine = "atheris"
        except ImportError:
            engine = "hypothesis"
    t0 = time.monotonic()
    runs = _with_atheris(args.seconds) if engine == "atheris" else _with_hypothesis(args.seconds)
    took = time.monotonic() - t0
    print("| engine | inputs | seconds | inputs/s | crashes |\n| --- | --- | --- | --- | --- |")
    print(f"| {engine} | {runs:,} | {took:.1f} | {runs / took:,.0f} | 0 |")


if __name__ == "__main__":
    main()
