"""Fault windows end to end: the runner, the rig and the simulated deployment on loopback.

Each test checks the verdict's figures against what the simulator itself counted.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

from loadtest.config.feature_specs import FAULTS
from loadtest.features.faults.plan import TargetSpec
from loadtest.features.faults.proxy import FaultProxy
from loadtest.features.faults.rig import FaultRig
from loadtest.features.faults.target import ManagedTarget
from loadtest.sim import SimConfig
from loadtest.sim.process import InProcessSim, sim_command
from tests.conftest import blocks, make_scenario, read_jsonl, run_against

SPEC = SimConfig(
    ttft_ms=5.0,
    itl_ms=3.0,
    ttft_sigma=0.1,
    itl_sigma=0.1,
    draft_token_ms=0.2,
    draft_timeout_ms=50.0,
    probe_backoff_ms=100.0,
    probe_backoff_max_ms=200.0,
)


def _faults(*events: dict[str, Any]) -> dict[str, Any]:
    return {"events": list(events)}


def _accounted(rows: list[dict[str, Any]], summary_counts: dict[str, int]) -> None:
    outcomes = [r["outcome"] for r in rows]
    assert len(rows) == len({r["index"] for r in rows})
    assert outcomes.count("ok") + outcomes.count("failed") + outcomes.count("cancelled") == len(
        rows
    )
    assert summary_counts["sent"] == len([r for r in rows if not r["warmup"]])


async def test_draft_down_falls_back_and_holds(tmp_path: Path) -> None:
    sc = make_scenario(
        {"mode": "closed", "concurrency": 4, "duration_s": 10},
        max_tokens=48,
        # 3 s down: at one scrape a second, two scrapes always fall inside the window.
        # 3 s before and 4 s after it: a before phase of 1 s slices shows its own spread,
        # and a hiccup of the shared machine cannot cover every slice after the window.
        faults=_faults({"kind": "draft_down", "at_s": 3, "duration_s": 3}),
    )
    async with InProcessSim(SimConfig(role="draft", draft_token_ms=0.2)) as draft:
        host, port = draft.url.removeprefix("http://").split(":")
        proxy = FaultProxy(host, int(port))
        await proxy.start()
        # accept_chat 0.9: speculation gives (RTT + 3.45 ms) / 4.1 tokens a step, under
        # plain decoding's 3 ms while the propose RTT (target -> proxy -> draft, one loop
        # with the client, ~1-2 ms) stays under ~8.9 ms; at 0.7 (2.77 tokens a step) the
        # "during > before" TPOT check below had only ~4.9 ms of RTT to spare under load.
        # draft_timeout_ms 2000: the draft, the target and the client share this test's
        # event loop, and a stall of it past the 60 ms default (a busy machine: seen with
        # 3 test workers on 2 cores), and once past 500 ms (a clean-clone CI with 4
        # workers: a TimeoutError between 1 and 2 s, the scrape at 2 s counting one
        # fallback), timed a healthy draft out, a fallback outside the window. A down
        # draft refuses its connections at once, whatever the timeout.
        fields = {
            **_fields(SPEC),
            "draft_url": proxy.url,
            "accept_chat": 0.9,
            "draft_timeout_ms": 2000.0,
        }
        async with InProcessSim(SimConfig(**fields)) as target:
            rig = FaultRig(FAULTS.of(sc), proxy=proxy, metrics_url=target.url + "/metrics")
            _, outcome = await run_against(target, sc, tmp_path, hooks=[rig, rig.load_hook()])
            assert target.server is not None and target.server.engine is not None
            engine = target.server.engine
    (window,) = blocks(outcome)["faults"]
    assert window["kind"] == "draft_down"
    assert window["failed_overlapping"] == 0
    assert window["verdict"] == "held", window["reason"]
    # A fallback outside the window (seen once in a suite run: 2 against the window's 1)
    # says which draft errors and when, to tell a stalled machine from a recovery bug.
    scraped = [(x["t_s"], x.get("fallbacks")) for x in read_jsonl(tmp_path / "metrics.jsonl")]
    assert window["fallbacks"] == engine.health.fallbacks >= 1, (
        engine.draft_errors,
        window["start_s"],
        window["end_s"],
        scraped,
    )
    assert engine.plain_steps > 0 and engine.spec_steps > 0
    assert window["acceptance"]["before"] is not None and window["acceptance"]["before"] > 0
    # No drafts while it was down. A step already verifying when the proxy went down
    # may still land inside the window, and its own acceptance can be anything (2 of 4
    # is 0.5, above the mean before): so compare how much was drafted, not the ratio.
    samples = read_jsonl(tmp_path / "metrics.jsonl")
    start, end = window["start_s"], window["end_s"]

    def drafted_per_s(a: float, b: float) -> float:
        inside = [x for x in samples if x.get("ok") and a <= x["t_s"] and x["t_end_s"] <= b]
        first, last = inside[0], inside[-1]
        assert last is not first, "too few scrapes in the span"
        drafted = float(last["draft_tokens"]) - float(first["draft_tokens"])
        return drafted / (float(last["t_s"]) - float(first["t_s"]))

    before_rate = drafted_per_s(0.0, start)
    assert before_rate > 0
    assert drafted_per_s(start, end) < before_rate / 20
    # The window's own figure leaves that edge step out: nothing drafted, no acceptance.
    assert window["acceptance"]["during"] is None, window["acceptance"]
    assert window["during"]["requests"] > 0
    # Plain decoding is slower than speculation: TPOT during the outage is worse.
    during, before = window["during"]["tpot_p50_ms"], window["before"]["tpot_p50_ms"]
    assert during is not None and before is not None and during > before
    server = blocks(outcome).get("server")
    assert server is not None and server["engine"] == "loadtest-sim"
    assert (tmp_path / "metrics.jsonl").exists()


def _fields(cfg: SimConfig) -> dict[str, Any]:
    return {f: getattr(cfg, f) for f in cfg.__dataclass_fields__}


async def test_cancellations_free_slots_and_are_counted(tmp_path: Path) -> None:
    sc = make_scenario(
        {"mode": "closed", "concurrency": 6, "duration_s": 4},
        max_tokens=200,
        faults=_faults(
            {"kind": "cancel", "at_s": 1, "duration_s": 2, "fraction": 0.5, "after_tokens": 5}
        ),
    )
    async with InProcessSim(SimConfig(ttft_ms=3.0, itl_ms=2.0, min_output_fraction=1.0)) as sim:
        rig = FaultRig(FAULTS.of(sc), metrics_url=sim.url + "/metrics")
        _, outcome = await run_against(sim, sc, tmp_path, hooks=[rig, rig.load_hook()])
        assert sim.server is not None
        server_cancelled = sim.server.cancelled
    rows = read_jsonl(tmp_path / "requests.jsonl")
    injected = [r for r in rows if r["injected_cancel"]]
    (window,) = blocks(outcome)["faults"]
    assert window["injected_cancels"] == len(injected) > 0
    assert all(r["outcome"] == "cancelled" and r["output_tokens"] >= 5 for r in injected)
    assert server_cancelled >= len(injected)  # the server saw each client go away
    assert window["settled_s"] is not None and window["running_excess"] == 0
    assert window["cancel_close_p50_ms"] is not None
    # What this test is about is freed slots (running_excess, settled_s, the counts). The
    # TTFT recovery part of the verdict compares one 1 s slice after the window with a
    # one-slice before phase, so a shift of the shared machine can call it "degraded"
    # (~1e-4 to 1e-3 a run); a slot kept by a cancelled request is "failed", "kept slots".
    assert window["verdict"] in ("held", "degraded"), window["reason"]
    assert "kept slots" not in window["reason"]
    _accounted(rows, {"sent": outcome.metrics.sent})


async def test_leaked_slots_fail_the_cancel_window(tmp_path: Path) -> None:
    sc = make_scenario(
        {"mode": "closed", "concurrency": 4, "duration_s": 3},
        max_tokens=100,
        faults=_faults(
            {
                "kind": "cancel",
                "at_s": 0.3,
                "duration_s": 1.7,
                "fraction": 1.0,
                "after_tokens": 2,
                "settle_s": 0.3,
            }
        ),
    )
    # Each cancelled request keeps its slot for the ~1 s it would have streamed.
    leaky = SimConfig(ttft_ms=3.0, itl_ms=10.0, min_output_fraction=1.0, leak_cancelled=True)
    async with InProcessSim(leaky) as sim:
        rig = FaultRig(FAULTS.of(sc), metrics_url=sim.url + "/metrics")
        _, outcome = await run_against(sim, sc, tmp_path, hooks=[rig, rig.load_hook()])
    (window,) = blocks(outcome)["faults"]
    assert window["injected_cancels"] > 0
    assert window["verdict"] == "failed"
    assert (window.get("running_excess") or 0) > 0
    assert "kept slots" in window["reason"]


async def test_idle_gap_then_burst(tmp_path: Path) -> None:
    sc = make_scenario(
        # 3.5 s after the window: three 1 s slices and a half, so one slow slice of the
        # shared machine cannot keep every slice after the burst from recovering.
        {"mode": "closed", "concurrency": 2, "duration_s": 6},
        max_tokens=8,
        faults=_faults({"kind": "idle", "at_s": 1, "duration_s": 1.5, "burst": 10}),
    )
    # TTFT 20 ms: the recovery bound (1.1 x the before median + 0.5 ms, or the bootstrap
    # p99 of medians) leaves ~2.5 ms over the median; at 3 ms it was ~0.8 ms, which a 25%
    # change of the client's overhead on a busy machine could use up.
    cfg = SimConfig(ttft_ms=20.0, itl_ms=1.0, cold_start_ms=300.0, idle_cold_s=1.0)
    async with InProcessSim(cfg) as sim:
        rig = FaultRig(FAULTS.of(sc), metrics_url=sim.url + "/metrics")
        _, outcome = await run_against(sim, sc, tmp_path, hooks=[rig, rig.load_hook()])
        assert sim.server is not None
        cold_starts = sim.server.cold_starts
    rows = read_jsonl(tmp_path / "requests.jsonl")
    (window,) = blocks(outcome)["faults"]
    sent_in_gap = [r for r in rows if 1000 + 50 < r["sent_ms"] < 2500 - 50]
    assert sent_in_gap == []  # nothing offered while idle
    # The burst: the first 10 sends after the gap all left before any of them got a
    # token (ordering, not a 100 ms window: it fails only if the loop stalled for the
    # whole 300 ms warm-up, or if the burst was paced out instead of sent at once).
    burst = sorted((r for r in rows if r["sent_ms"] >= 2500), key=lambda r: r["sent_ms"])[:10]
    assert len(burst) == 10
    assert max(r["sent_ms"] for r in burst) < min(r["sent_ms"] + r["ttft_ms"] for r in burst)
    assert cold_starts == 2  # the first request of the run, and the burst after idling
    # The burst paid the warm-up: its first tokens came >= 300 ms after sending.
    assert max(r["ttft_ms"] for r in burst) >= 300
    assert window["recovery_s"] is not None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_restart_of_a_managed_target_accounts_for_every_request(tmp_path: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    cfg = SimConfig(ttft_ms=5.0, itl_ms=5.0, load_s=0.3, min_output_fraction=1.0)
    target = ManagedTarget(
        TargetSpec(tuple(sim_command(cfg, port=port)), f"{url}/health", url),
        tmp_path / "target.log",
    )
    sc = make_scenario(
        {"mode": "closed", "concurrency": 4, "duration_s": 5, "grace_s": 2},
        max_tokens=100,
        faults=_faults(
            {
                "kind": "restart",
                "at_s": 1.5,
                "duration_s": 1,
                "down_s": 0.3,
                "signal": "kill",  # a crash: a graceful stop would let the streams finish
                "max_failures": 4,
            }
        ),
    )
    rig = FaultRig(FAULTS.of(sc), target=target, metrics_url=f"{url}/metrics")
    await rig.start()
    assert rig.initial_ready_s is not None and rig.initial_ready_s >= 0.3

    class _Url:
        url = ""

    endpoint = _Url()
    endpoint.url = url
    _, outcome = await run_against(endpoint, sc, tmp_path, hooks=[rig, rig.load_hook()])  # type: ignore[arg-type]
    rows = read_jsonl(tmp_path / "requests.jsonl")
    (window,) = blocks(outcome)["faults"]
    # Every session had a stream open, unless, at the kill, one sat in the ~0.2-1 ms
    # between its last answer and its next send (each request streams ~530 ms): that is
    # P ~ 4 x 1/530 ~ 0.2-0.8% a run, so 3 is allowed; two at once, C(4,2) x (2e-3)^2
    # ~ 2e-5. Every caught stream failed as a disconnect, none otherwise.
    caught = window["caught_in_flight"]
    assert 3 <= caught <= 4, window
    assert window["caught_failed"] == caught
    assert window["failed_by_class"] == {"disconnected": caught}
    assert window["time_to_ready_s"] >= 0.3  # includes the simulated weight loading
    first = window["time_to_first_token_s"]
    assert first is not None and first > window["time_to_ready_s"]
    assert window["verdict"] in ("held", "degraded"), window["reason"]
    assert [r for r in rows if r["error_class"] == "connect"] == []  # load held while down
    _accounted(rows, {"sent": outcome.metrics.sent})
    assert target.pid is None  # the runner closed the rig: the target is stopped
    assert target.starts == 2


async def test_a_leak_shows_when_sessions_fill_every_slot(tmp_path: Path) -> None:
    # 2 sessions against 2 slots: a leaked slot never makes running exceed the client's
    # in-flight count (the next request waits in the queue instead), so the check must
    # count what the endpoint queues as well as what it runs.
    sc = make_scenario(
        {"mode": "closed", "concurrency": 2, "duration_s": 3},
        max_tokens=100,
        faults=_faults(
            {
                "kind": "cancel",
                "at_s": 0.3,
                "duration_s": 1.7,
                "fraction": 1.0,
                "after_tokens": 2,
                "settle_s": 0.3,
            }
        ),
    )
    # Each cancelled request keeps generating (its slot busy) for 1.5 s after it is gone.
    leaky = SimConfig(
        ttft_ms=3.0, itl_ms=10.0, min_output_fraction=1.0, leak_on_disconnect_s=1.5, max_running=2
    )
    async with InProcessSim(leaky) as sim:
        rig = FaultRig(FAULTS.of(sc), metrics_url=sim.url + "/metrics")
        _, outcome = await run_against(sim, sc, tmp_path, hooks=[rig, rig.load_hook()])
    samples = read_jsonl(tmp_path / "metrics.jsonl")
    assert max(s.get("running", 0) for s in samples) <= 2  # running alone cannot tell
    (window,) = blocks(outcome)["faults"]
    assert window["injected_cancels"] > 0
    assert window["verdict"] == "failed", window["reason"]
    assert (window.get("running_excess") or 0) > 0
    assert "kept slots" in window["reason"]


async def test_windows_that_injected_nothing_or_were_not_reached(tmp_path: Path) -> None:
    # A slow endpoint: the 2 sessions' first requests outlast the cancel window, so no
    # request starts in it and nothing is cancelled; the second window is due after the
    # run's end. Neither may read "held", and the run must not wait for the second.
    sc = make_scenario(
        {"mode": "closed", "concurrency": 2, "duration_s": 1.5, "grace_s": 5},
        max_tokens=4,
        faults=_faults(
            {"kind": "cancel", "at_s": 0.4, "duration_s": 0.6, "fraction": 1.0, "after_ms": 1},
            {"kind": "cancel", "at_s": 60, "duration_s": 5, "fraction": 1.0, "after_ms": 1},
        ),
    )
    async with InProcessSim(SimConfig(ttft_ms=1500.0, itl_ms=1.0, ttft_sigma=0.0)) as sim:
        rig = FaultRig(FAULTS.of(sc), metrics_url=sim.url + "/metrics")
        _, outcome = await run_against(sim, sc, tmp_path, hooks=[rig, rig.load_hook()])
    first, late = blocks(outcome)["faults"]
    assert first["started_in_window"] == 0 and first["injected_cancels"] == 0
    assert first["verdict"] == "not_exercised", first["reason"]
    assert late["verdict"] == "not_exercised"
    assert late["reason"].startswith("not reached")
    rows = read_jsonl(tmp_path / "requests.jsonl")
    assert max(r["end_ms"] for r in rows) < 60_000  # the run ended long before it
    assert outcome.metrics.sent > 0
