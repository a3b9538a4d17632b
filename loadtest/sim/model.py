"""The simulated model, without I/O: what to answer and when, drawn from a seeded RNG.

Everything about one response (time to first token, the gap before each token, the
tokens themselves, tool calls, injected errors) is decided up front from the request
body and the seed, so the same request always gets the same answer, and the server can
report the truth about when it meant to send each token.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass
from pathlib import Path

import orjson

from loadtest.errors import UsageError
from loadtest.model.json import JsonObject
from loadtest.sim.arguments import WORDS as _WORDS
from loadtest.sim.arguments import fake_arguments, padded, tool_results
from loadtest.sim.reasoning import check_reasoning, effort_scale, plan_think
from loadtest.sim.tokenize import count_prompt_tokens

__all__ = ["ResponsePlan", "SimConfig", "Truth", "fake_arguments", "plan_response"]


@dataclass(frozen=True, slots=True)
class SimConfig:
    """Distributions of the simulated endpoint (times in milliseconds)."""

    seed: int = 0
    ttft_ms: float = 20.0
    """Median time to first token for an empty prompt."""
    ttft_per_1k_tokens_ms: float = 15.0
    """Added prefill time per 1,000 prompt tokens (prompt tokens ~ characters / 4)."""
    ttft_sigma: float = 0.25
    """Log-normal spread of TTFT (0 = fixed)."""
    itl_ms: float = 8.0
    """Median gap between tokens."""
    itl_sigma: float = 0.3
    """Log-normal spread of the gap between tokens (0 = fixed)."""
    pace_sigma: float = 0.0
    """Log-normal spread of the engine's pace: every decode step and prefill is slowed
    by one shared factor, drawn anew every ``pace_period_ms`` (a machine whose speed
    drifts with what else runs on it; independent gaps, ``itl_sigma``, average that
    away within a request, and would not slow concurrent streams together; 0 = none)."""
    pace_period_ms: float = 1000.0
    """How long one draw of the pace holds."""
    min_output_fraction: float = 0.5
    """Output length is drawn uniformly between this fraction of max_tokens and all of it
    (all of it with ``ignore_eos``; at least ``min_tokens`` when the request asks)."""
    length_hints: bool = True
    """Honour the request's ``ignore_eos`` and ``min_tokens`` as vLLM and llama.cpp do
    (off: stop early anyway, as an engine that ignores them)."""
    invalid_tool_rate: float = 0.0
    """Share of tool-call responses whose arguments are broken JSON."""
    agent_steps: int = 2
    """Agent sessions: with this many tool results since the last user message, answer
    in text instead of calling a tool again (a turn of agent_steps calls and an answer).
    Requests without tool results always get a call, as before."""
    diverge_rate: float = 0.0
    """Share of text answers whose last word differs from the plan: a deliberate bug, so
    that the output-equivalence check of ``loadtest ab`` can be seen to fail."""
    error_rate: float = 0.0
    """Share of requests answered with HTTP 500."""
    disconnect_rate: float = 0.0
    """Share of streams cut off half way (connection closed without [DONE])."""
    model: str = "sim-llm"
    """The model id the simulator serves and lists at ``/v1/models``."""
    max_batch: int = 64
    """Most chunks written in one write when tokens are due together."""
    piece_bytes: int = 0
    """Pad every text piece to this many characters (long SSE lines, as from an engine
    echoing token ids); tool-call arguments then come in pieces this long (0: one word
    a piece, arguments 4 characters)."""
    max_running: int = 0
    """Requests served at once; more wait in a queue (0 = no limit)."""
    lockstep: bool = False
    """Plain streams decode in the engine's shared steps, one token each a step, as a
    batching engine steps them (llama.cpp, vLLM): streams that start together end
    together, and a step's spread (``itl_sigma``) falls on the whole batch (off: each
    stream on its own schedule, its gaps drawn on their own). A draft implies it."""
    procs: int = 1
    """Server processes sharing the port (SO_REUSEPORT): the kernel spreads connections
    over them, so the simulator can outrun a driver. ``/sim/truth`` and ``/metrics`` then
    answer for the process the request reached."""
    reuse_port: bool = False
    """Bind with SO_REUSEPORT (set for the processes of ``procs``; not needed by hand)."""
    role: str = "model"
    """``model`` serves the OpenAI API; ``draft`` serves proposals to a target."""
    draft_url: str = ""
    """Base URL of the draft server: set, the model speculates (it becomes the target)."""
    spec_k: int = 4
    """Tokens the draft proposes per step."""
    accept_tool_calls: float = 0.9
    """Per-token acceptance probability of drafts for requests that offer tools."""
    accept_code: float = 0.85
    """Per-token acceptance probability of drafts for code prompts."""
    accept_chat: float = 0.7
    """Per-token acceptance probability of drafts for chat and reasoning prompts."""
    accept_multilingual: float = 0.35
    """Per-token acceptance probability of drafts for non-English prompts."""
    verify_factor: float = 1.15
    """A verify step's time relative to a plain decode step (``itl_ms``), before the
    cost of the tokens it carries (``step_token_share``)."""
    step_token_share: float = 0.01
    """Load model: each token a decode step carries beyond its own adds this share of
    ``itl_ms`` to the step (a compute cost on top of the memory-bound floor), so
    latency grows with the batch, and a verify step, carrying ``spec_k + 1`` tokens per
    sequence, loses its advantage past a computable batch (0 = flat, the old model)."""
    prefill_chunk_tokens: int = 256
    """Load model: prompt tokens a request in its prefill adds to each step until its
    first token (chunked prefill sharing steps with decode; 0: prefills cost the other
    streams nothing, as in a profile whose TTFT already holds them)."""
    prefill_stall: float = 0.0
    """llama.cpp's prefill: the share of a prompt's prefill that every decoding stream
    waits out (1: llama.cpp processes a prompt whole, in one step with the others' decode
    tokens). Above 0, prompts admitted within a step of each other are prefilled
    together, later ones after them (0: ``prefill_chunk_tokens`` decides)."""
    flavour: str = "vllm"
    """Engine-specific extras of a stream: ``vllm`` (none), or ``llama``: the final
    chunk carries llama.cpp's ``timings`` (prompt_n, prompt_ms, predicted_n,
    predicted_ms, cache_n, and draft_n, draft_n_accepted when speculating)."""
    tokenizer: str = ""
    """A ``tokenizer.json`` (needs the ``tokenizers`` package): prompts are counted and
    ``/tokenize`` answers with it, instead of four characters a token."""
    profile: str = ""
    """A profile TOML fitted to a real engine (``loadtest sim --fit``): its settings are
    the base, settings given explicitly win; the server warns when the load leaves the
    range it was fitted on."""
    kv_tokens: int = 0
    """KV capacity in tokens (0 = unlimited): requests wait while theirs do not fit."""
    kv_preempt: bool = True
    """With ``kv_tokens``: an answer takes room token by token, and when the pool is full
    the request admitted last is preempted and recomputed, as vLLM does (off: a request
    reserves its prompt and whole answer when admitted, and none is ever preempted)."""
    draft_timeout_ms: float = 60.0
    """The target gives up on a draft answer after this long and decodes plainly."""
    probe_backoff_ms: float = 250.0
    """First wait before probing a failed draft again; doubles per failed probe."""
    probe_backoff_max_ms: float = 4000.0
    """The longest wait between probes of a failed draft."""
    draft_token_ms: float = 0.5
    """Draft role: time to propose one token (a step costs ``spec_k`` of these)."""
    accept_collapse_after_s: float = 0.0
    """A deliberate failure: this many seconds after the target's first verify step, the
    target accepts no more drafts (every step yields its own token only, while still
    paying for the verify), as when acceptance falls to 1.0 token a step unnoticed
    (0 = never)."""
    draft_mode: str = "ok"
    """Draft role: ``ok``, ``garbage`` (answers that are not proposals) or ``hang``."""
    load_s: float = 0.0
    """Seconds of model loading before the server listens (time to ready)."""
    cold_start_ms: float = 0.0
    """Extra delay the requests pay after a (re)start or an idle period (warm-up)."""
    idle_cold_s: float = 0.0
    """Idle seconds after which the server is cold again (0 = never)."""
    prefix_cache: bool = False
    """Keep a prefix cache: a repeated prompt prefix pays only part of its prefill."""
    prefix_hit_factor: float = 0.25
    """Share of the prefill time a prefix-cache hit still pays."""
    step_chunks: str = "joined"
    """How a speculative step's accepted tokens are streamed: ``joined``, one chunk
    carrying them all (vLLM, SGLang), or ``burst``, one chunk per token written back to
    back (llama.cpp)."""
    leak_cancelled: bool = False
    """Fault for testing the tester: keep a cancelled request's slot until it would have ended."""
    leak_on_disconnect_s: float = 0.0
    """Fault for testing the tester: keep a cancelled request's slot (and its count in
    ``running``) this many seconds after the client went away (0 = free it at once)."""
    reasoning_tokens: int = 0
    """Mean length of a think segment before each answer (0 = no reasoning)."""
    reasoning_sigma: float = 0.5
    """Log-normal spread of the think segment's length (0 = always the mean)."""
    accept_reasoning: float = 0.7
    """Per-token draft acceptance in the think segment (the answer keeps its category's)."""
    reasoning_format: str = "vllm"
    """How the think segment is streamed: ``vllm`` (``reasoning`` and the older
    ``reasoning_content``), ``reasoning``, ``llama`` (``reasoning_content``) or
    ``think-tags`` (raw ``<think>`` tags in the content, no reasoning parser)."""
    reasoning_usage: str = "sent"
    """Usage's ``reasoning_tokens``: ``sent``, ``none`` or ``wrong`` (half, a bug)."""

    def check(self) -> None:
        """Raise ``UsageError`` naming the first setting out of range."""
        if self.procs < 1:
            raise UsageError(f"sim procs must be at least 1, not {self.procs}")
        if self.role not in ("model", "draft"):
            raise UsageError(f"sim role must be 'model' or 'draft', not {self.role!r}")
        if self.step_chunks not in ("joined", "burst"):
            raise UsageError(f"sim step_chunks must be joined or burst, not {self.step_chunks!r}")
        if self.flavour not in ("vllm", "llama"):
            raise UsageError(f"sim flavour must be vllm or llama, not {self.flavour!r}")
        if self.draft_mode not in ("ok", "garbage", "hang"):
            raise UsageError(f"draft_mode must be ok, garbage or hang, not {self.draft_mode!r}")
        rates = ("accept_tool_calls", "accept_code", "accept_chat", "accept_multilingual")
        for name in (*rates, "diverge_rate"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise UsageError(f"sim {name} must be between 0 and 1, not {value}")
        if self.step_token_share < 0 or self.kv_tokens < 0:
            raise UsageError("sim step_token_share and kv_tokens must not be negative")
        if self.tokenizer and not Path(self.tokenizer).is_file():
            raise UsageError(f"sim tokenizer {self.tokenizer}: no such file")
        if not 0.0 <= self.prefill_stall <= 1.0:
            raise UsageError(f"sim prefill_stall must be between 0 and 1, not {self.prefill_stall}")
        if self.prefill_chunk_tokens < 0:
            raise UsageError("sim prefill_chunk_tokens must not be negative")
        check_reasoning(self)
        if self.spec_k < 1:
            raise UsageError(f"sim spec_k must be at least 1, not {self.spec_k}")
        times = ("ttft_ms", "itl_ms", "pace_sigma", "pace_period_ms", "draft_timeout_ms")
        for name in (*times, "load_s", "cold_start_ms", "piece_bytes"):
            if getattr(self, name) < 0:
                raise UsageError(f"sim {name} must not be negative")


@dataclass(frozen=True, slots=True)
class ResponsePlan:
    """Everything the server will do for one request."""

    finish_reason: str
    """``stop`` (it ended before ``max_tokens``), ``length`` (it reached it), ``tool_calls``."""
    ttft_ns: int
    prefill_ns: int
    """The part of ``ttft_ns`` that grows with the prompt (what a prefix cache saves)."""
    token_offsets_ns: tuple[int, ...]
    """Send time of each output piece, from when the request arrived."""
    pieces: tuple[str, ...]
    """Text of each streamed piece (tokens, or tool-call argument fragments)."""
    tool_name: str | None
    tool_arguments: str | None
    prompt_tokens: int
    fail_status: int | None
    disconnect_after: int | None
    """Close the stream after this many pieces (None = finish normally)."""
    cached_tokens: int | None = None
    """Prompt tokens the prefix cache served (``usage.prompt_tokens_details``); None
    without a prefix cache, as vLLM leaves the details out then."""
    max_tokens: int = 0
    """The most tokens the request allowed (its ``max_tokens``, or the default 128)."""
    call_key: str = ""
    """Names the tool call (``call_<key>``): from the request's bytes, not its arrival
    order, so that a conversation that carries the id back is the same every run."""
    reasoning_pieces: int = 0
    reasoning_reported: int | None = None
    """The first ``reasoning_pieces`` are the think segment (``sim.reasoning``), and
    its usage reports ``reasoning_reported`` of them (None: left out)."""

    @property
    def completion_tokens(self) -> int:
        """Tokens the response carries."""
        return len(self.pieces)


@dataclass(slots=True)
class Truth:
    """What the server knows about one request (``/sim/truth``), filled in as it goes.

    Not frozen: the handler fills it in at each stage of the one request it serves.
    """

    id: str
    received_ns: int
    completion_tokens: int
    category: str
    first_token_scheduled_ns: int | None = None
    first_token_written_ns: int | None = None
    end_ns: int | None = None
    outcome: str = "ok"
    tokens_written: int = 0
    """Output pieces written so far (fewer than planned when the client went away)."""
    steps: int = 0
    """Decode steps that gave it tokens, the first included: each token in the plain
    model, each verify step with speculation (vLLM's inter-token gaps are between them)."""
    admitted_ns: int | None = None
    """When it got a slot (its prefill began): llama.cpp's ``prompt_ms`` starts there."""
    drafted: int = 0
    """Draft tokens proposed for it (llama.cpp's ``draft_n``)."""
    draft_accepted: int = 0
    """Of those, accepted (``draft_n_accepted``)."""
    peer: str = ""
    """The client address the request came from (a driver's ``--source-address``)."""
    preemptions: int = 0
    """Times it was evicted for KV room (``kv_tokens``) and recomputed."""
    reasoning_tokens: int = 0
    reasoning_start_ns: int | None = None
    reasoning_end_ns: int | None = None
    answer_start_ns: int | None = None
    """The think segment's pieces, when its first and last were written, and when the
    answer's first was (the first token's time, without reasoning)."""


def _rng_for(seed: int, body: bytes) -> random.Random:
    digest = hashlib.blake2b(body, digest_size=8, key=seed.to_bytes(8, "little", signed=True))
    return random.Random(int.from_bytes(digest.digest(), "little"))


def _lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(rng.gauss(0.0, sigma)) if sigma > 0 else median


_NOT_SAMPLING = ("seed", "stream", "stream_options", "user")
"""Keys that change no greedy answer: at temperature 0 an engine gives the same text
whatever the seed, streamed or not."""


def _answer_key(body: bytes, request: JsonObject) -> bytes:
    """What the answer is drawn from: the request's bytes, less what cannot change a
    greedy answer at temperature 0 (with a higher one, a ``seed`` gives another)."""
    if request.get("temperature") == 0 and any(k in request for k in _NOT_SAMPLING):
        return orjson.dumps({k: v for k, v in request.items() if k not in _NOT_SAMPLING})
    return body


def plan_response(cfg: SimConfig, body: bytes, request: JsonObject) -> ResponsePlan:
    """Decide the whole response to ``request`` (whose raw bytes are ``body``)."""
    key_body = _answer_key(body, request)
    rng = _rng_for(cfg.seed, key_body)
    prompt_tokens = count_prompt_tokens(cfg.tokenizer, request)
    prefill_ms = cfg.ttft_per_1k_tokens_ms * prompt_tokens / 1000
    ttft_ms = _lognormal(rng, cfg.ttft_ms, cfg.ttft_sigma) + prefill_ms
    fail = 500 if rng.random() < cfg.error_rate else None
    max_tokens = int(request.get("max_tokens") or request.get("max_completion_tokens") or 128)
    max_tokens = max(1, min(max_tokens, 32768))
    n = rng.randint(_fewest_tokens(cfg, request, max_tokens), max_tokens)
    tool_name = None
    arguments = None
    tools = request.get("tools")
    if tools and isinstance(tools, list) and tool_results(request) < cfg.agent_steps:
        fn = rng.choice(tools).get("function", {})
        tool_name = str(fn.get("name", "tool"))
        args = fake_arguments(fn.get("parameters") or {}, rng)
        arguments = orjson.dumps(args).decode()
        if rng.random() < cfg.invalid_tool_rate:
            arguments = arguments[: max(1, len(arguments) // 2)]  # cut: not JSON any more
        step = cfg.piece_bytes or 4
        pieces = tuple(arguments[i : i + step] for i in range(0, len(arguments), step)) or ("{}",)
    else:
        pieces = tuple(
            padded(("" if i == 0 else " ") + _WORDS[rng.randrange(len(_WORDS))], cfg.piece_bytes)
            for i in range(n)
        )
    # Its own draw, so every other draw of the plan stays as it was.
    diverge = cfg.diverge_rate > 0 and _rng_for(cfg.seed + 1, key_body).random() < cfg.diverge_rate
    if diverge and tool_name is None and pieces:
        pieces = (*pieces[:-1], (" " if len(pieces) > 1 else "") + "diverged")
    offsets = []
    t = ttft_ms
    think, scale = None, effort_scale(request) if cfg.reasoning_tokens > 0 else 0.0
    if scale > 0:
        # Its own draw (seed + 3): the answer stays as it was without reasoning.
        think = plan_think(_rng_for(cfg.seed + 3, key_body), cfg, max_tokens - 1, scale)
        if tool_name is None:  # max_tokens holds the reasoning and the answer
            pieces = pieces[: max(1, max_tokens - len(think.pieces))]
            n = len(think.pieces) + len(pieces)
        for gap in think.gaps_ms:
            offsets.append(int(t * 1e6))
            t += gap
        pieces = think.pieces + pieces
    for _ in pieces[len(offsets) :]:
        offsets.append(int(t * 1e6))
        t += _lognormal(rng, cfg.itl_ms, cfg.itl_sigma)
    disconnect = len(pieces) // 2 if rng.random() < cfg.disconnect_rate else None
    # Its own hash (seed + 2), like the divergence draw: the plan's other draws stay put.
    key = (cfg.seed + 2).to_bytes(8, "little", signed=True)
    call_key = hashlib.blake2b(body, digest_size=8, key=key).hexdigest() if tool_name else ""
    return ResponsePlan(
        finish_reason="tool_calls" if tool_name else "length" if n >= max_tokens else "stop",
        ttft_ns=int(ttft_ms * 1e6),
        prefill_ns=int(prefill_ms * 1e6),
        token_offsets_ns=tuple(offsets),
        pieces=pieces,
        tool_name=tool_name,
        tool_arguments=arguments,
        prompt_tokens=prompt_tokens,
        fail_status=fail,
        disconnect_after=disconnect,
        max_tokens=max_tokens,
        call_key=call_key,
        reasoning_pieces=0 if think is None else len(think.pieces),
        reasoning_reported=None if think is None else think.reported,
    )


def _fewest_tokens(cfg: SimConfig, request: JsonObject, max_tokens: int) -> int:
    """The shortest answer allowed: all of ``max_tokens`` with ``ignore_eos`` (the model
    never stops), at least ``min_tokens``, else the configured share of ``max_tokens``
    (vLLM and llama.cpp take both keys)."""
    low = max(1, math.ceil(max_tokens * cfg.min_output_fraction))
    if not cfg.length_hints:
        return low
    if request.get("ignore_eos") is True:
        return max_tokens
    asked = request.get("min_tokens")
    if isinstance(asked, int) and not isinstance(asked, bool) and asked > 0:
        low = max(low, min(asked, max_tokens))
    return low
