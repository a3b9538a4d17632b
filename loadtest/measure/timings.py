"""Server-side timings (llama.cpp's per-response ``timings``) beside the client's view.

llama.cpp reports, in each response's last chunk, how long prefill (``prompt_ms``) and
decoding (``predicted_ms``) took on the server, and how many draft tokens it proposed
and accepted. From those loadtest derives the client's overhead (client TTFT minus the
server's prompt time: network, queueing and the client itself) and the acceptance rate
as the server counted it per response.
"""

from __future__ import annotations

from hdrh.histogram import HdrHistogram

from loadtest.measure.hdr import fast_percentile
from loadtest.model.record import RequestRecord
from loadtest.model.summary import ServerTimingsBlock

__all__ = ["ServerTimings"]


class ServerTimings:
    """Accumulates the timings of the measured responses that carried them."""

    def __init__(self) -> None:
        self.responses = 0
        self.draft_n = 0
        self.draft_accepted = 0
        self.prompt_ms_total = 0.0
        self.predicted_ms_total = 0.0
        self.predicted_n = 0
        # Overhead can be negative by timer skew on tiny prompts: record it shifted.
        self._overhead = HdrHistogram(1, 3_600_000_000, 3)
        self._prompt = HdrHistogram(1, 3_600_000_000, 3)

    def add(self, rec: RequestRecord) -> None:
        """Account for one record (ignored unless it carries numeric timings)."""
        t = rec.server_timings
        if not t or rec.first_token_ns is None:
            return
        prompt_ms = t.get("prompt_ms")
        if not isinstance(prompt_ms, int | float):
            return
        self.responses += 1
        self.prompt_ms_total += prompt_ms
        self._prompt.record_value(max(1, int(prompt_ms * 1000)))
        ttft_ms = (rec.first_token_ns - rec.sent_ns) / 1e6
        self._overhead.record_value(max(1, int((ttft_ms - prompt_ms) * 1000)))
        predicted_ms, predicted_n = t.get("predicted_ms"), t.get("predicted_n")
        if isinstance(predicted_ms, int | float) and isinstance(predicted_n, int):
            self.predicted_ms_total += predicted_ms
            self.predicted_n += predicted_n
        draft_n, accepted = t.get("draft_n"), t.get("draft_n_accepted")
        if isinstance(draft_n, int) and isinstance(accepted, int):
            self.draft_n += draft_n
            self.draft_accepted += accepted

    def summary(self) -> ServerTimingsBlock | None:
        """The ``server_timings`` section of summary.json (None without any timings)."""
        if not self.responses:
            return None

        def pct(h: HdrHistogram, q: float) -> float:
            return round(float(fast_percentile(h, q)) / 1000, 3)

        return {
            "responses": self.responses,
            "prompt_ms": {"p50": pct(self._prompt, 50), "p95": pct(self._prompt, 95)},
            "client_overhead_ms": {
                "p50": pct(self._overhead, 50),
                "p95": pct(self._overhead, 95),
                "p99": pct(self._overhead, 99),
            },
            "decode_tokens_per_s": round(self.predicted_n / self.predicted_ms_total * 1000, 2)
            if self.predicted_ms_total
            else None,
            "draft_tokens": self.draft_n,
            "draft_accepted": self.draft_accepted,
            "acceptance_rate": round(self.draft_accepted / self.draft_n, 4)
            if self.draft_n
            else None,
        }
