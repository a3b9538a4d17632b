"""The ``summary.json`` document as types: what the run writes and every reader reads.

TypedDicts (see ``model.verdict`` for why): the summary *is* the JSON file, so the same
object is built, written, validated on read (``model.io.load_summary``) and turned into
the published JSON Schema (``docs/summary.schema.json``), with nothing in between.
Keys that only some runs have (faults, an agent, a scraped server) are ``NotRequired``.
The statistics' own types are in ``model.stats``, the agent blocks in
``model.agent_blocks``; both are re-exported here, where every reader looks.
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

from loadtest.model.agent_blocks import (
    AgentBlock,
    AgentCategory,
    AgentSteps,
    AgentTraceBlock,
    AgentTraceRecorded,
    AgentTraceSession,
    AgentTraceSplit,
)
from loadtest.model.reasoning import ReasoningBlock
from loadtest.model.stats import MetricStats, Outcome, Percentiles, StatKey
from loadtest.model.verdict import DriverHealth, FaultVerdict, SloBlock

__all__ = [
    "AgentBlock",
    "AgentCategory",
    "AgentSteps",
    "AgentTraceBlock",
    "AgentTraceRecorded",
    "AgentTraceSession",
    "AgentTraceSplit",
    "CategoryBlock",
    "DecodeStepsBlock",
    "LoadBlock",
    "LostWorker",
    "MetricStats",
    "Outcome",
    "Percentiles",
    "RebuiltBlock",
    "RequestsBlock",
    "RunBlock",
    "RunExtra",
    "RunHead",
    "RunStart",
    "ServerBlock",
    "ServerBucket",
    "ServerResolution",
    "ServerTimingsBlock",
    "StatKey",
    "StoppedBy",
    "Summary",
    "ThroughputBlock",
    "ToolCallsBlock",
    "WorkerLag",
]


class LoadBlock(TypedDict):
    """The load the scenario asked for."""

    mode: str
    concurrency: int | None
    rate: float | None
    burstiness: float | None
    duration_s: float | None
    requests: int | None
    warmup_s: float
    arrival: NotRequired[dict[str, float | int | str | bool]]
    """The arrival process's own keys (``config.arrivals``; ``burstiness`` is also above)."""


class RunHead(TypedDict):
    """What was run, against what and when: all a run knows once its load starts."""

    id: str
    scenario: str
    scenario_path: str | None
    endpoint: str
    model: str
    api: str
    stream: bool
    started_at: str
    load: LoadBlock
    prompts: dict[str, int]
    seed: int | None


class WorkerLag(TypedDict):
    """One worker's own dispatch lag (``--workers``), beside the merged figure."""

    worker: int
    dispatch_lag_ms: Percentiles


class LostWorker(TypedDict):
    """A worker of a run with ``--workers`` that died before handing in its results."""

    worker: int
    exit: int | None
    """Its exit code (negative: the signal that killed it), None if unknown."""
    requests: int
    """The requests it had accounted (whole lines of its requests.jsonl), merged as
    every other worker's; those it still had in flight when it died are not known."""
    torn_lines: int


class RunBlock(RunHead):
    """What was run, against what, when and for how long."""

    duration_s: float
    measured_s: float
    interrupted: bool
    # Added by the orchestrator (``RunExtra``).
    prompt_load_s: NotRequired[float]
    target_time_to_ready_s: NotRequired[float]
    workers: NotRequired[int]
    worker_dispatch_lag: NotRequired[list[WorkerLag]]
    """Each worker's dispatch lag p50/p99: a lag the merge hides in one busy worker."""
    workers_lost: NotRequired[list[LostWorker]]
    """Workers that died before handing in results (``--workers``): their accounted
    requests are merged; the run counts as interrupted."""
    simulated: NotRequired[bool]
    """True when the built-in simulator served the run: its tool calls are random, so
    their matches with expected answers are chance (the table leaves the share out)."""


class RunExtra(TypedDict, total=False):
    """What the orchestrator adds to the ``run`` block."""

    prompt_load_s: float
    target_time_to_ready_s: float
    workers: int
    worker_dispatch_lag: list[WorkerLag]
    workers_lost: list[LostWorker]
    simulated: bool


class RunStart(TypedDict):
    """``run.json``, written when the load starts: what a summary rebuilt from
    ``requests.jsonl`` needs and the lines do not hold, should the run die."""

    schema: int
    run: RunHead
    slo: list[str]
    """The run's objectives as ``--slo`` takes them (``ttft_ms.p95=500``, ``error_rate=0.01``)."""
    fault_windows: list[str]
    """The labels of the scenario's fault events: a rebuild cannot judge them, and says so."""
    fault_starts_s: NotRequired[list[float]]
    """When each of those windows was planned to open (seconds from the start): a run
    killed before one says it was not reached. Absent in records written before it."""
    agent: bool
    """Agent sessions: their task section is not rebuilt, and a rebuild says so."""
    pid: int
    host: str
    """Where the run's process ran: a folder whose process still runs is not a dead run."""
    simulated: NotRequired[bool]
    """The built-in simulator served the run (``run.simulated``); absent in records
    written before it was kept, and where it did not."""


class RebuiltBlock(TypedDict):
    """How a summary was rebuilt after its run died before writing one (``loadtest
    summarize``, or ``report``/``view``/``compare`` of such a folder)."""

    reason: Literal["killed"]
    """The run ended without writing summary.json: killed (SIGKILL, OOM, a CI timeout)
    or crashed. Requests in flight at that moment have no line and are not counted."""
    rebuilt_at: str
    lines: int
    """Complete lines of requests.jsonl accounted for: ``requests.sent`` counts each once."""
    torn_lines: int
    """A last line cut short by the kill (0 or 1): not a request, not counted."""
    start_record: bool
    """Whether run.json was there; without it the scenario, endpoint, model, start time
    and SLOs are unknown (an older loadtest, or a kill before the load started)."""
    from_hlog: list[str]
    """Metrics taken from histograms.hlog: requests.jsonl holds no chunk times without
    ``--record-chunks``, so the chunk gaps and tokens per chunk come from there."""
    hlog_requests: int | None
    """Requests histograms.hlog covers (its end-to-end count, against ``measured_ok``);
    None without a readable histograms.hlog."""
    not_rebuilt: list[str]
    """What only the run itself could say, left out (fault verdicts, agent tasks...)."""


class RequestsBlock(TypedDict):
    """Outcome counts, failures by class and the error rate."""

    sent: int
    ok: int
    failed: int
    cancelled: int
    warmup: int
    errors: dict[str, int]
    error_rate: float
    tokens_estimated: int
    resent_stale_connection: NotRequired[int]
    measured_ok: NotRequired[int]
    """Measured (not warm-up) requests that completed."""
    cancelled_by: NotRequired[dict[str, int]]
    """Requests the engine cancelled, by why: ``grace_expired`` (still running when the
    grace period after the run ended), ``aborted``, ``warmup_unneeded``, ``run_cancelled``."""


class ThroughputBlock(TypedDict):
    """Requests and output tokens per measured second."""

    requests_per_s: float
    output_tokens_per_s: float
    output_tokens: int


class DecodeStepsBlock(TypedDict):
    """Tokens per decode step pooled over the streams ``tokens_per_step`` counts.

    ``tokens_per_step`` is each request's own figure, so its mean weighs a 3-token
    answer like a 900-token one: 2.35 where the engine's counters gave 1.76 on one run.
    This is the sum of their tokens after the first over the sum of their steps after
    the first, which is what an engine's accepted per decode step + 1 counts."""

    streams: int
    tokens: int
    steps: int
    tokens_per_step: float | None
    """tokens / steps; None without a stream of two steps."""


class ToolCallsBlock(TypedDict):
    """How many answers called tools, and how many calls were valid and correct."""

    responses_with_calls: int
    valid: int
    judged: int
    correct: int


class CategoryBlock(TypedDict):
    """The latencies of one prompt category."""

    metrics: dict[str, MetricStats]
    tokens_per_chunk: MetricStats


class ServerBucket(TypedDict):
    """The histogram bucket that holds one of the server's percentiles: the server's
    histogram knows no finer, so a bucket wide beside the figure makes the figure an
    interpolation, not a measurement (vLLM's queue buckets start at 0-300 ms)."""

    lower_ms: float
    upper_ms: float | None
    """None for the +Inf bucket: above the highest finite bound."""
    holds: int
    """Observations in that bucket, of the ``observed`` in the window."""


class ServerResolution(TypedDict):
    """Where the server's p50 and p95 of one histogram lie, bucket by bucket."""

    observed: int
    p50: ServerBucket
    p95: ServerBucket


class ServerBlock(TypedDict):
    """The scraped ``/metrics`` of the endpoint over the run: acceptance, the server's own
    latency percentiles, and peaks."""

    samples: int
    scraped: int
    engine: NotRequired[str | None]
    acceptance_rate: NotRequired[float | None]
    accepted_per_position: NotRequired[list[float] | None]
    """P(the draft token at position i is accepted), i = 0..k-1, from vLLM's
    ``spec_decode_num_accepted_tokens_per_pos`` over ``spec_decode_num_drafts``; None
    where the server counts positions but drafted nothing in the run."""
    prefix_cache_hit_rate: NotRequired[float | None]
    """Prompt tokens the prefix cache served over those looked up (vLLM's
    ``prefix_cache_hits`` / ``prefix_cache_queries``); None with no lookups."""
    prefix_cache_hits: NotRequired[int]
    """Prompt tokens vLLM's prefix cache served in the window (``ab``/``compare`` read
    it where llama.cpp's ``timings.cache_n`` is missing)."""
    prefix_cache_queries: NotRequired[int]
    """Prompt tokens vLLM looked up in its prefix cache in the window."""
    drafts: NotRequired[int]
    """Verify steps that checked a draft, by the engine's counter, in the window."""
    draft_tokens: NotRequired[int]
    accepted_tokens: NotRequired[int]
    accepted_per_draft: NotRequired[float | None]
    """The engine's accepted tokens per drafted step (vLLM: accepted / drafts; a step
    with no n-gram match drafts nothing and is not in it)."""
    accepted_per_step: NotRequired[float]
    """The engine's accepted tokens per decode step: (output - first tokens) / decode
    steps - 1 where its TTFT and inter-token histograms count the first tokens and the
    steps (vLLM), else accepted / (output - accepted - finished requests), which counts
    drafts accepted past a request's end too (an upper bound on short answers); beside
    loadtest's ``decode_steps.tokens_per_step`` - 1 from the stream (pooled the same
    way; tool-call streams left out)."""
    accepted_per_step_note: NotRequired[str]
    """Why ``accepted_per_step`` is missing where the counters were read: a figure above
    the draft length is impossible and is not printed."""
    window: NotRequired[str]
    """What the counters were read between: ``measured`` (the scrapes at the measured
    window's edges, warm-up excluded) or ``run`` (first to last scrape: no edge rows)."""
    ttft_ms: NotRequired[Percentiles]
    """p50/p95 of the server's own TTFT histogram between the window's edges."""
    itl_ms: NotRequired[Percentiles]
    """p50/p95 of the server's own inter-token latency histogram, likewise."""
    queue_ms: NotRequired[Percentiles]
    """p50/p95 of vLLM's time in its queue per request, likewise."""
    prefill_ms: NotRequired[Percentiles]
    """p50/p95 of vLLM's prefill time per request, likewise."""
    decode_ms: NotRequired[Percentiles]
    """p50/p95 of vLLM's decode time per request, likewise."""
    histogram_requests: NotRequired[int]
    """Requests the server's TTFT histogram counted between the window's edges."""
    resolution: NotRequired[dict[str, ServerResolution]]
    """For each of ``ttft``, ``itl``, ``queue``, ``prefill``, ``decode``: the bucket
    that holds its p50 and p95. A figure printed without its bucket only where the
    bucket is narrow beside it (``server_lines``)."""
    latency_note: NotRequired[str]
    """Why the server's latency percentiles are missing, where it keeps histograms."""
    running_peak: NotRequired[float]
    waiting_peak: NotRequired[float]
    kv_cache_usage_peak: NotRequired[float]
    gpu_memory_mib_peak: NotRequired[float]
    gpu_power_w_peak: NotRequired[float]
    target_rss_mib_peak: NotRequired[float]
    fallbacks: NotRequired[int]
    preemptions: NotRequired[int]
    """Running requests the engine preempted for KV room over the window (vLLM's
    ``num_preemptions``): each one waited and recomputed its prompt and answer."""
    note: NotRequired[str]


class ServerTimingsBlock(TypedDict):
    """Timings the server reported in its answers (llama.cpp's ``timings``)."""

    responses: int
    prompt_ms: Percentiles
    client_overhead_ms: Percentiles
    decode_tokens_per_s: float | None
    draft_tokens: int
    draft_accepted: int
    acceptance_rate: float | None


class StoppedBy(TypedDict):
    """A stop rule that ended a process's load before its bound (``[[load.stop]]``)."""

    rule: str
    """The rule's kind (``errors``)."""
    reason: str
    """Why, with the figures it saw (``errors: 12 of 20 measured requests failed ...``)."""
    fails: bool
    """Whether its firing fails the run's gate (an error budget spent) or is a normal end."""


class Summary(TypedDict):
    """The whole ``summary.json``; its fields are documented in the README."""

    schema: int
    run: RunBlock
    requests: RequestsBlock
    metrics: dict[str, MetricStats]
    tokens_per_chunk: MetricStats
    tokens_per_step: NotRequired[MetricStats]
    """Tokens per verify step: chunks of one read or a sub-millisecond burst, grouped."""
    decode_steps: NotRequired[DecodeStepsBlock]
    throughput: ThroughputBlock
    tool_calls: ToolCallsBlock
    by_category: dict[str, CategoryBlock]
    out_of_range_values: int
    driver: NotRequired[DriverHealth]  # absent from summaries written before it existed
    slo: SloBlock
    faults: NotRequired[list[FaultVerdict]]
    server: NotRequired[ServerBlock | None]
    server_timings: NotRequired[ServerTimingsBlock | None]
    reasoning: NotRequired[ReasoningBlock]
    """Only where a measured request reasoned before its answer."""
    agent: NotRequired[AgentBlock]
    agent_trace: NotRequired[AgentTraceBlock]
    stopped: NotRequired[list[StoppedBy]]
    """Only when a stop rule ended the load: one entry per process it ended it in."""
    rebuilt: NotRequired[RebuiltBlock]
    """Only in a summary rebuilt from the files of a run that died (``RebuiltBlock``)."""
