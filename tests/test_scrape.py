"""Server metrics of vLLM, SGLang, llama.cpp and DCGM mapped onto one set of fields."""

from __future__ import annotations

from loadtest.features.scrape import parse_metrics, read_page
from loadtest.features.server_summary import acceptance, summarize_samples

VLLM = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 7.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.42
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 1000.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 640.0
"""

SGLANG = """# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m"} 3.0
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="m"} 1.0
# TYPE sglang:token_usage gauge
sglang:token_usage{model_name="m"} 0.1
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="m"} 2.7
"""

LLAMACPP = """# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 0
"""

DCGM = """# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0"} 30000
DCGM_FI_DEV_FB_USED{gpu="1"} 20000
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0"} 300.5
DCGM_FI_DEV_POWER_USAGE{gpu="1"} 200.0
"""


def test_vllm_names() -> None:
    m = parse_metrics(VLLM)
    assert m == {
        "running": 7.0,
        "waiting": 2.0,
        "kv_cache_usage": 0.42,
        "draft_tokens": 1000.0,
        "accepted_tokens": 640.0,
    }


def test_sglang_names() -> None:
    assert parse_metrics(SGLANG) == {
        "running": 3.0,
        "waiting": 1.0,
        "kv_cache_usage": 0.1,
        "accept_length": 2.7,
    }


def test_llamacpp_names() -> None:
    assert parse_metrics(LLAMACPP) == {"running": 2.0, "waiting": 0.0}


def test_dcgm_sums_over_gpus() -> None:
    assert parse_metrics(DCGM) == {"gpu_memory_mib": 50000.0, "gpu_power_w": 500.5}


def test_acceptance_and_peaks() -> None:
    a = {"t_s": 0, "ok": True, "draft_tokens": 100.0, "accepted_tokens": 50.0, "running": 1}
    b = {"t_s": 1, "ok": True, "draft_tokens": 300.0, "accepted_tokens": 200.0, "running": 9}
    assert acceptance(a, b) == 0.75
    assert acceptance(a, a) is None
    s = summarize_samples([a, {"t_s": 0.5, "ok": False}, b])
    assert s["acceptance_rate"] == 0.75
    assert s["running_peak"] == 9
    assert (s["samples"], s["scraped"]) == (3, 2)


# vLLM 0.11's page in part: two label sets (engines) to add up, the per-position counter,
# the TTFT histogram and the inter-token one under both its names.
VLLM_011 = """# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="m"} 100.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 70.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 49.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="0"} 70.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",model_name="m",position="1"} 49.0
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="m"} 1000.0
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="m"} 250.0
# TYPE vllm:gpu_prefix_cache_hits counter
vllm:gpu_prefix_cache_hits_total{engine="0",model_name="m"} 250.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.25",model_name="m"} 4.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 4.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.3
# TYPE vllm:time_per_output_token_seconds histogram
vllm:time_per_output_token_seconds_bucket{engine="0",le="0.01",model_name="m"} 1.0
vllm:time_per_output_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 1.0
vllm:time_per_output_token_seconds_count{engine="0",model_name="m"} 1.0
vllm:time_per_output_token_seconds_sum{engine="0",model_name="m"} 0.005
# TYPE vllm:inter_token_latency_seconds histogram
vllm:inter_token_latency_seconds_bucket{engine="0",le="0.01",model_name="m"} 9.0
vllm:inter_token_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 10.0
vllm:inter_token_latency_seconds_count{engine="0",model_name="m"} 10.0
vllm:inter_token_latency_seconds_sum{engine="0",model_name="m"} 0.1
"""


def test_vllm_011_positions_prefix_cache_and_histograms() -> None:
    page = read_page(VLLM_011)
    # The deprecated gpu_prefix_cache_hits repeats the count: not added a second time.
    assert page.fields == {
        "drafts": 200.0,
        "prefix_cache_queries": 1000.0,
        "prefix_cache_hits": 250.0,
    }
    assert page.accepted_per_position == [140.0, 98.0]
    assert page.histograms["ttft"] == {"le": [0.1, 0.25], "counts": [3.0, 4.0, 4.0]}
    # The 0.11 name wins over the old one (here with other counts), whichever comes first.
    assert page.histograms["itl"] == {"le": [0.01], "counts": [9.0, 10.0]}
    older = read_page(VLLM_011.replace("inter_token_latency", "other_latency"))
    assert older.histograms["itl"] == {"le": [0.01], "counts": [1.0, 1.0]}
    assert read_page(VLLM).histograms == {} and read_page(VLLM).accepted_per_position == []


def test_position_rates_and_prefix_hit_rate_over_the_run() -> None:
    first = {"t_s": 0, "ok": True, "drafts": 100.0, "accepted_per_position": [70.0, 49.0]}
    first |= {"prefix_cache_queries": 0.0, "prefix_cache_hits": 0.0}
    last = {"t_s": 9, "ok": True, "drafts": 300.0, "accepted_per_position": [210.0, 129.0]}
    last |= {"prefix_cache_queries": 800.0, "prefix_cache_hits": 200.0}
    s = summarize_samples([first, last])
    assert s["accepted_per_position"] == [0.7, 0.4]
    assert s["prefix_cache_hit_rate"] == 0.25
    # Counted but not exercised: no drafts, no lookups in the run.
    idle = summarize_samples([first, first])
    assert idle["accepted_per_position"] is None and idle["prefix_cache_hit_rate"] is None
    # A server without those counters: the keys stay out.
    assert "accepted_per_position" not in summarize_samples([{"ok": True, "running": 1}])


def test_server_latency_from_the_histograms_at_the_window_edges() -> None:
    start = {"ok": True, "edge": "start", "histograms": {"ttft": _ttft(10, 10, 10)}}
    middle = {"ok": True, "histograms": {"ttft": _ttft(0, 0, 0)}}  # not an edge: ignored
    end = {"ok": True, "edge": "end", "histograms": {"ttft": _ttft(60, 110, 110)}}
    s = summarize_samples([start, middle, end])
    # 100 requests between the edges, 50 under 0.1 s and 50 in 0.1-0.25 s.
    assert s["histogram_requests"] == 100
    assert s["ttft_ms"] == {"p50": 100.0, "p95": 235.0}
    assert "itl_ms" not in s and "latency_note" not in s
    cut = summarize_samples([start, middle])  # no end edge: a killed run
    assert "ttft_ms" not in cut and "both edges" in cut["latency_note"]
    back = summarize_samples([{**end, "edge": "start"}, {**start, "edge": "end"}])  # a restart
    assert "ttft_ms" not in back and "went back" in back["latency_note"]


def _ttft(*cumulative: float) -> dict[str, list[float]]:
    return {"le": [0.1, 0.25], "counts": list(cumulative)}
