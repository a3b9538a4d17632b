"""The options of one run, each with its command-line flag declared on it.

Light on purpose (dataclasses and the flag declarations only): the CLI builds its
arguments from these fields for ``--help`` and usage errors, which must not import the
scenario model. ``app.options`` lays the options over a scenario.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from loadtest.flag import flag

__all__ = ["RunOptions"]

_TIMEOUTS = "timeouts (over the scenario's [timeouts])"


def _timeout(text: str) -> float | None:
    """A timeout's flag: seconds, finite and positive, listed with the other timeouts."""
    declared: float | None = flag(
        None, kind=float, finite=True, positive=True, group=_TIMEOUTS, metavar="S", help=text
    )
    return declared


def _is_uvloop(loop: str) -> bool:
    return loop == "uvloop"


@dataclass(frozen=True, slots=True)
class RunOptions:
    """The flags of ``loadtest run``; None means "as the scenario says"."""

    scenario: str | None = flag(
        None,
        name="scenario",
        help="scenario TOML, or the name of a shipped one such as tool-calls (default: mixed)",
    )
    """A TOML path, or the name of a shipped scenario (``tool-calls``)."""
    endpoint: str | None = flag(
        None, help="base URL, e.g. http://127.0.0.1:8000 (default: start the built-in simulator)"
    )
    model: str | None = flag(
        None,
        not_blank=True,
        help="model name (default: the scenario's, else the first of /v1/models)",
    )
    concurrency: int | None = flag(
        None,
        kind=int,
        scope="load",
        exclusive="load",
        minimum=1,
        help="closed loop with N sessions",
    )
    rate: float | None = flag(
        None,
        kind=float,
        scope="load",
        exclusive="load",
        finite=True,
        positive=True,
        help="open loop at R requests/s (Poisson unless the scenario names another arrival "
        "process)",
    )
    duration: float | None = flag(
        None,
        kind=float,
        exclusive="bound",
        finite=True,
        positive=True,
        help="seconds of measured load",
    )
    requests: int | None = flag(
        None, kind=int, exclusive="bound", minimum=1, help="number of measured requests"
    )
    max_tokens: int | None = flag(
        None,
        kind=int,
        minimum=1,
        help="max_tokens of every request, over the scenario's, its sources' and prompts'",
    )
    """Wins over the scenario's, every source's and every prompt's own max_tokens."""
    warmup: float | None = flag(
        None, kind=float, finite=True, minimum=0, help="seconds of warm-up, not measured"
    )
    out: str = flag("out", help="results folder (default: out)")
    seed: int | None = flag(None, kind=int, minimum=0, help="seed of prompt choice and arrivals")
    timeout: float | None = _timeout("longest one request may take, send to end")
    """``--timeout``: the longest one request may take, send to end (``[timeouts] total_s``)."""
    first_byte_timeout: float | None = _timeout("longest wait for the first byte")
    """``--first-byte-timeout`` (``[timeouts] first_byte_s``)."""
    chunk_timeout: float | None = _timeout("longest gap between two chunks")
    """``--chunk-timeout``: the longest gap between chunks (``[timeouts] between_chunks_s``)."""
    tokenizer: str | None = flag(
        None,
        group="workloads",
        metavar="PATH",
        help="a tokenizer.json for synthetic and trace sources (default: the endpoint's /tokenize)",
    )
    speedup: float | None = flag(
        None,
        kind=float,
        group="workloads",
        metavar="F",
        help="replay a trace F times faster (0.5: twice as slow)",
    )
    """``--speedup``: a trace's clock runs this many times faster (checked where a source
    is timed: a run with no trace ignores it)."""
    api_key_env: str | None = flag(
        None,
        metavar="NAME",
        help="environment variable holding the bearer token (default: OPENAI_API_KEY)",
    )
    api_key_file: str | None = flag(
        None, metavar="PATH", help="file holding the bearer token (first line)"
    )
    ca_bundle: str | None = flag(None, metavar="PEM", help="trust this CA for an https endpoint")
    insecure: bool = flag(
        False,
        switch=True,
        help="do not verify the endpoint's TLS certificate (self-signed staging servers)",
    )
    slo: tuple[str, ...] = flag(
        (),
        repeated=True,
        metavar="METRIC.STAT=LIMIT",
        help="an objective, e.g. ttft_ms.p95=500 or error_rate=0.01 (repeatable); a missed "
        "one, or one with too few values to tell (a p99 needs 100), makes the command exit "
        "1; 'none' drops the scenario's own",
    )
    """``--slo`` values (``ttft_ms.p95=500``), on top of the scenario's ``[slo]``."""
    stop_saturated: bool = flag(
        False,
        switch=True,
        help="end the load early, failing it, when the endpoint cannot keep up: requests in "
        "flight and TTFT from the intended send both climbing steadily over 10 s (a "
        "[[load.stop]] rule of kind saturated; on by default in sweep --search rate=...)",
    )
    """``--stop-saturated``: add a ``saturated`` stop rule where the scenario has none."""
    keepalive: bool = flag(True, negated=True, help="a new connection per request")
    source_addresses: tuple[str, ...] = flag(
        (),
        name="--source-address",
        repeated=True,
        split=",",
        metavar="ADDR[,ADDR...]",
        help="local addresses the connections leave from, in turn (each worker its own), "
        "e.g. 127.0.0.1,127.0.0.2: past ~28,000 connections one address runs out of "
        "ports (default: the scenario's [load] source_addresses, else the kernel's choice)",
    )
    """``--source-address``: local addresses the connections leave from, in turn, over
    the scenario's ``[load] source_addresses`` (empty: as the scenario says)."""
    tui: bool = flag(True, negated=True, help="plain progress lines, no TUI")
    record_outputs: bool = flag(
        False,
        switch=True,
        help="write a digest and the head of every answer into requests.jsonl (for the "
        "output-equivalence check of compare)",
    )
    record_chunks: bool = flag(
        False, switch=True, help="write every token chunk's time into requests.jsonl"
    )
    workers: int = flag(
        1,
        kind=int,
        minimum=1,
        help="driver processes, each with its share of the load; results merged (default: 1)",
    )
    """Driver processes (``--workers``); their metrics are merged."""
    ray: str | None = flag(
        None,
        metavar="ADDRESS",
        help="run the --workers as tasks on a Ray cluster (ADDRESS of its head, or auto); "
        "needs the ray extra",
    )
    """``--ray ADDRESS`` (or ``auto``): the workers run as tasks on a Ray cluster."""
    uvloop: bool = flag(
        False,
        name="--loop",
        choices=("asyncio", "uvloop"),
        shown_default="asyncio",
        read=_is_uvloop,
        help="event loop without the TUI (default: asyncio; uvloop costs less per read with "
        "many slow streams, but its arrivals are not kernel-stamped and it records no "
        "write_ms)",
    )
    api_key: str | None = field(default=None, repr=False)
    """The key itself, for programmatic use; wins over ``api_key_env``/``api_key_file``
    (no flag: a key on the command line shows in process lists and shell history)."""
    run_dir: str | None = None
    """The run's own folder instead of ``out/<run-id>`` (a sweep's steps, one level deep)."""
    print_results: bool = True
    """Print the results table at the end (a sweep prints one capacity table instead)."""
    label: str = ""
    """Starts the run's notes and progress lines, where runs go in turn (``ab``: ``A 1/2``)."""
    temperature: float | None = None
    """Overrides the scenario's sampling temperature (``ab`` uses 0)."""
    live_labels: tuple[tuple[str, str], ...] = ()
    """Labels of this run's series in the live outputs: ``side`` (``ab``), ``step``."""
    sim_speculative: bool | None = None
    """The built-in simulator speculates (``[sim] speculative``); ``ab``'s ``sim:`` sides."""
    sampling: tuple[tuple[str, str | float | bool], ...] = ()
    """Request fields over the scenario's ``[sampling]`` (``ab --sampling-sweep``)."""
    sim_settings: tuple[tuple[str, float | int], ...] = ()
    """Settings of the built-in simulator over ``[sim]``'s, the last of a name winning
    (``ab``'s ``sim:`` sides: ``--server-sweep``, then ``--draft-max``'s ``spec_k``)."""
    steps: tuple[tuple[str, float], ...] = ()
    """A sweep's or a search's step: (sweep dimension, value), applied last, in order
    (``config.dimensions``)."""
