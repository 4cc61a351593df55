"""A direct scrape's histograms with unreadable or negative buckets: the series at fault is
left out or marked, and the rest of the lane stays."""

from __future__ import annotations

from cockpit.core.figures import lane_figures
from cockpit.sources.scrape import ScrapeSource

TTFT = "vllm:time_to_first_token_seconds"
LABELS = 'model_name="m",engine="0"'


def exposition(n: int, buckets: dict[str, float]) -> str:
    lines = [f"vllm:num_requests_running{{{LABELS}}} 4", f"vllm:num_requests_waiting{{{LABELS}}} 2"]
    lines += [f'{TTFT}_bucket{{{LABELS},le="{le}"}} {count * n}' for le, count in buckets.items()]
    lines += [f"{TTFT}_count{{{LABELS}}} {10 * n}", f"{TTFT}_sum{{{LABELS}}} {3.0 * n}"]
    return "\n".join(lines) + "\n"


def scraped(buckets: dict[str, float], scrapes: int = 5) -> ScrapeSource:
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    for k in range(1, scrapes + 1):
        source.ingest(exposition(k, buckets), 1000.0 + 5 * k)
    return source


def test_one_bucket_with_an_unreadable_le_is_left_out_and_counted() -> None:
    source = scraped({"0.1": 2, "fast": 5, "0.5": 6, "1.0": 9, "+Inf": 10})
    totals = source.totals("lane", "{}", 300, None)
    figures = lane_figures(totals).figures
    assert figures["running_now"].value == 4 and figures["waiting_now"].value == 2
    assert figures["ttft_mean"].value == 0.3
    assert totals.histograms["ttft"] == ((0.1, 8.0), (0.5, 24.0), (1.0, 36.0), (float("inf"), 40.0))
    assert figures["ttft_p50"].value is not None
    assert "1 bucket series with an unreadable le (le='fast') left out" in totals.warnings[0]


def test_a_negative_bucket_increase_is_marked() -> None:
    source = scraped({"0.1": 2, "0.5": 6, "1.0": 9, "+Inf": 10})
    # The 0.5 bucket drops below zero: a reset to a negative count, which no counter holds.
    source.ingest(exposition(6, {"0.1": 2, "0.5": -10, "1.0": 9, "+Inf": 10}), 1035.0)
    totals = source.totals("lane", "{}", 300, None)
    p90 = lane_figures(totals).figures["ttft_p90"]
    assert p90.value is not None and p90.doubtful
    assert p90.reason.startswith("buckets not cumulative (le=0.5 counts "), p90.reason
