"""The Grafana dashboard of the live figures (``loadtest grafana > dashboard.json``).

Grafana's JSON model, built here rather than shipped as a file so that every query is
made from the names the exporter writes (``live.families``): a renamed series cannot
leave a panel behind. Beside loadtest's panels sit the engine's own, by the names vLLM
and llama.cpp use (``A or B``: whichever the endpoint has), from the same Prometheus.
Queries use Grafana's ``$__rate_interval`` and the ``category`` variable (``all``: the
whole mix); ``side`` (``ab``) and ``step`` (``sweep``) stay apart in every legend.
"""

from __future__ import annotations

from loadtest.live.families import PREFIX, series_name
from loadtest.model.json import JsonObject

__all__ = ["ANNOTATION", "dashboard", "panel_queries"]

_BY = "side, step"
"""Kept apart in every aggregate: the sides of ``ab`` and the steps of ``sweep``."""

_LATENCIES = (
    ("TTFT", "ttft_ms"),
    ("Inter-token gap", "itl_ms"),
    ("TPOT", "tpot_ms"),
    ("End to end", "e2e_ms"),
    ("Time to a tool call", "tool_call_ms"),
)


def _exact(metric: str) -> str:
    return f'{series_name(metric)}_exact{{window="10s", category="$category"}}'


def _bucketed(metric: str, q: float) -> str:
    rate = f'rate({series_name(metric)}_bucket{{category="$category"}}[$__rate_interval])'
    return f"histogram_quantile({q}, sum by (le, {_BY}) ({rate}))"


def _slo_line(metric: str) -> str:
    return f'{PREFIX}_slo_limit{{slo=~"{metric}[.].*"}} / 1000'


def _latency_panels() -> list[tuple[str, list[tuple[str, str]]]]:
    panels = []
    for title, metric in _LATENCIES:
        panels.append(
            (
                f"{title}: exact percentiles, last 10 s (HDR)",
                [(_exact(metric), "{{quantile}} {{side}} {{step}}")],
            )
        )
        panels.append(
            (
                f"{title}: from the buckets (histogram_quantile) and the SLO",
                [
                    *(
                        (_bucketed(metric, q), f"p{q * 100:g} {{{{side}}}} {{{{step}}}}")
                        for q in (0.5, 0.95, 0.99)
                    ),
                    (_slo_line(metric), "SLO {{slo}}"),
                ],
            )
        )
    return panels


def _run_panels() -> list[tuple[str, list[tuple[str, str]]]]:
    p = PREFIX
    rate = "[$__rate_interval]"
    return [
        (
            "Requests per second, by outcome",
            [(f"sum by (outcome, {_BY}) (rate({p}_requests_total{rate}))", "{{outcome}}")],
        ),
        (
            "Output tokens per second",
            [(f"sum by ({_BY}) (rate({p}_output_tokens_total{rate}))", "tokens/s {{side}}")],
        ),
        (
            "Errors per second, by class",
            [
                (
                    f"sum by (error_class, {_BY}) (rate({p}_request_errors_total{rate}))"
                    " or on() vector(0)",
                    "{{error_class}}",
                )
            ],
        ),
        ("In flight", [(f"{p}_in_flight_requests", "in flight {{side}} {{step}}")]),
        (
            "The driver: client lag p99 (last 10 s) and busy",
            [
                (
                    f"{series_name('client_lag_ms')}_exact"
                    '{window="10s", category="all", quantile="0.99"}',
                    "client lag p99 {{side}} {{step}}",
                ),
                (f"{p}_driver_busy", "busy {{side}}"),
            ],
        ),
        ("SLOs met (1) or missed (0)", [(f"{p}_slo_met", "{{slo}} {{verdict}}")]),
        (
            "Fault windows: state now",
            [(f"{p}_fault_window == 1", "{{window}} {{kind}} {{state}}")],
        ),
    ]


def _engine_panels() -> list[tuple[str, list[tuple[str, str]]]]:
    r = "[$__rate_interval]"
    return [
        (
            "Engine: requests running and waiting",
            [
                ("sum(vllm:num_requests_running) or sum(llamacpp:requests_processing)", "running"),
                ("sum(vllm:num_requests_waiting) or sum(llamacpp:requests_deferred)", "waiting"),
            ],
        ),
        (
            "Engine: TTFT p95 as the server sees it",
            [
                (
                    "histogram_quantile(0.95, sum by (le) "
                    f"(rate(vllm:time_to_first_token_seconds_bucket{r})))",
                    "server TTFT p95",
                )
            ],
        ),
        (
            "Engine: draft tokens accepted per drafted token",
            [
                (
                    f"sum(rate(vllm:spec_decode_num_accepted_tokens_total{r})) / "
                    f"sum(rate(vllm:spec_decode_num_draft_tokens_total{r}))",
                    "acceptance",
                )
            ],
        ),
        (
            "Engine: generation tokens per second",
            [
                (
                    f"sum(rate(vllm:generation_tokens_total{r})) or "
                    f"sum(rate(llamacpp:tokens_predicted_total{r}))",
                    "tokens/s",
                )
            ],
        ),
    ]


def _panel(i: int, title: str, targets: list[tuple[str, str]]) -> JsonObject:
    return {
        "id": i + 1,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": 12 * (i % 2), "y": 8 * (i // 2)},
        "targets": [
            {"refId": chr(ord("A") + j), "expr": expr, "legendFormat": legend}
            for j, (expr, legend) in enumerate(targets)
        ],
    }


ANNOTATION = f'{PREFIX}_fault_window{{state="active"}} == 1'
"""The fault windows, drawn on every panel while active."""


def dashboard() -> JsonObject:
    """The dashboard's JSON model (Grafana 9 and later)."""
    panels = [*_latency_panels(), *_run_panels(), *_engine_panels()]
    return {
        "title": "loadtest: live run",
        "uid": "loadtest-live",
        "schemaVersion": 39,
        "time": {"from": "now-15m", "to": "now"},
        "refresh": "5s",
        "templating": {
            "list": [
                {"name": "datasource", "type": "datasource", "query": "prometheus"},
                {
                    "name": "category",
                    "type": "query",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "query": f"label_values({series_name('ttft_ms')}_bucket, category)",
                    "current": {"text": "all", "value": "all"},
                },
            ]
        },
        "annotations": {
            "list": [
                {
                    "name": "fault windows",
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "enable": True,
                    "expr": ANNOTATION,
                    "titleFormat": "{{window}} ({{kind}})",
                    "step": "1s",
                }
            ]
        },
        "panels": [_panel(i, title, targets) for i, (title, targets) in enumerate(panels)],
    }


def panel_queries(model: JsonObject) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of ``model``'s panels."""
    return [(p["title"], t["expr"]) for p in model["panels"] for t in p["targets"]]
