"""Server metrics of vLLM, SGLang, llama.cpp and DCGM mapped onto one set of fields."""

from __future__ import annotations

from loadtest.features.scrape import parse_metrics
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
