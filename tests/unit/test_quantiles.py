"""The quantile of cumulative buckets, step by step as Prometheus's `histogram_quantile`."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest

from cockpit.core.figures import format_figure, lane_figures
from cockpit.core.model import Bucket, Figure, LaneTotals, frozen_map
from cockpit.core.quantiles import histogram_quantile
from cockpit.core.snapshot import LaneSnapshot
from cockpit.runtime.report import json_receipt, markdown_receipt
from cockpit.widgets.pane import Cells
from cockpit.widgets.tails import tails_view

INF = math.inf
BUCKETS = ((0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (INF, 40.0))


def test_interpolates_linearly_inside_the_bucket_the_rank_falls_in() -> None:
    # rank 20 of 40 lies halfway through (0.1, 0.5]: 10 before it, 20 inside it.
    assert histogram_quantile(0.5, BUCKETS) == (pytest.approx(0.3), False)
    # rank 36 of 40: 6 of the 10 in (0.5, 1.0].
    assert histogram_quantile(0.9, BUCKETS) == (pytest.approx(0.8), False)


def test_the_first_bucket_starts_at_zero() -> None:
    assert histogram_quantile(0.1, BUCKETS) == (pytest.approx(0.04), False)


def test_a_first_bound_at_or_below_zero_is_the_answer_in_that_bucket() -> None:
    buckets = ((-1.0, 5.0), (1.0, 10.0), (INF, 10.0))
    assert histogram_quantile(0.2, buckets) == (-1.0, False)


def test_a_rank_in_the_inf_bucket_is_the_largest_finite_bound_as_a_lower_bound() -> None:
    buckets = ((1.0, 10.0), (60.0, 90.0), (INF, 100.0))
    assert histogram_quantile(0.95, buckets) == (60.0, True)
    assert histogram_quantile(0.9, buckets) == (60.0, False)  # rank 90 is reached at 60


def test_no_observations_or_too_few_buckets_have_no_quantile() -> None:
    assert histogram_quantile(0.5, ((1.0, 0.0), (INF, 0.0))) is None
    assert histogram_quantile(0.5, ((INF, 7.0),)) is None
    assert histogram_quantile(0.5, ()) is None
    assert histogram_quantile(0.5, ((1.0, 3.0), (2.0, 7.0))) is None  # no +Inf bucket
    assert histogram_quantile(math.nan, BUCKETS) is None


def test_order_of_buckets_does_not_matter() -> None:
    assert histogram_quantile(0.5, tuple(reversed(BUCKETS))) == histogram_quantile(0.5, BUCKETS)


def test_equal_bounds_are_added_together() -> None:
    split = ((0.1, 4.0), (0.1, 6.0), (0.5, 10.0), (0.5, 20.0), (1.0, 40.0), (INF, 40.0))
    assert histogram_quantile(0.5, split) == histogram_quantile(0.5, BUCKETS)


def test_a_count_below_an_earlier_one_is_raised_to_it() -> None:
    # 0.5's count dipped (its series was scraped a moment before the others): it counts 30.
    dipped = ((0.1, 10.0), (0.5, 30.0), (0.7, 25.0), (1.0, 40.0), (INF, 40.0))
    value, above = histogram_quantile(0.8, dipped) or (None, None)
    # rank 32: 0.7 holds 30 (raised), so 2 of the 10 in (0.7, 1.0].
    assert value == pytest.approx(0.76) and above is False


def test_quantile_outside_zero_one_is_refused() -> None:
    with pytest.raises(ValueError):
        histogram_quantile(1.5, BUCKETS)


def test_extremes() -> None:
    assert histogram_quantile(0.0, BUCKETS) == (0.0, False)
    assert histogram_quantile(1.0, BUCKETS) == (pytest.approx(1.0), False)


# --- the tail figures -----------------------------------------------------------------------


def _figures(**histograms: tuple[Bucket, ...]) -> Mapping[str, Figure]:
    totals = LaneTotals(
        "lane", "vllm", 3600, 2e9,
        histograms=frozen_map(histograms),
        missing=frozen_map({"queue": "not exposed by this engine (vllm:x_bucket)"}),
    )  # fmt: skip
    return lane_figures(totals).figures


def test_tail_figures_read_the_window_histograms() -> None:
    figures = _figures(ttft=((1.0, 10.0), (60.0, 90.0), (INF, 100.0)), e2e=((1.0, 0.0), (INF, 0.0)))
    p99 = figures["ttft_p99"]
    assert format_figure(p99) == "> 60.00 s"
    assert p99.above and p99.reason == "past the engine's largest bucket"
    p50 = figures["ttft_p50"]
    assert not p50.above and p50.value == pytest.approx(1 + 59 * 40 / 80)
    assert format_figure(p50) == "30.50 s"
    assert figures["e2e_p50"].reason == "no requests in window"
    assert figures["queue_p90"].reason == "not exposed by this engine (vllm:x_bucket)"
    assert figures["itl_p95"].reason == "no requests in window"


def test_a_tail_inside_the_first_bucket_says_it_is_interpolated_across_it() -> None:
    figures = _figures(queue=((0.3, 50.0), (1.0, 50.0), (INF, 50.0)))
    assert figures["queue_p50"].value == pytest.approx(0.15)
    assert figures["queue_p50"].reason == "within the engine's first bucket (≤ 0.3 s)"


def test_a_receipt_marks_a_lower_bound() -> None:
    totals = LaneTotals(
        "lane", "vllm", 3600, 2e9, histograms=frozen_map({"ttft": ((60.0, 90.0), (INF, 100.0))})
    )
    lane = LaneSnapshot("lane", "1h", totals, lane_figures(totals), None, None)
    figures = json_receipt(lane, None)["lane"]["figures"]
    assert figures["ttft_p99"] == {
        "label": "Time to first token p99", "value": 60.0, "unit": "seconds",
        "text": "> 60.00 s", "above": True, "note": "past the engine's largest bucket",
    }  # fmt: skip
    assert "above" not in figures["ttft_p50"]
    assert "| Time to first token | — | 33.33 s | 60.00 s | > 60.00 s | > 60.00 s |" in (
        markdown_receipt(lane, None).splitlines()
    )


# --- the mean beside the tails --------------------------------------------------------------

ITL_BUCKETS = ((0.01, 100.0), (0.02, 600.0), (0.05, 1000.0), (INF, 1000.0))
"""1,000 inter-token observations, 15 s in all: a mean of 15 ms."""


def _itl_lane(dialect: str) -> LaneSnapshot:
    values = {"itl_sum": 15.0, "itl_count": 1000.0, "spec_drafts": 100.0, "spec_accepted": 200.0}
    totals = LaneTotals(
        "lane", dialect, 3600, 2e9, values=frozen_map(values),
        histograms=frozen_map({"itl": ITL_BUCKETS}),
    )  # fmt: skip
    return LaneSnapshot("lane", "1h", totals, lane_figures(totals), None, None)


def test_the_inter_token_tails_sit_beside_their_own_histogram_s_mean() -> None:
    """SGLang's ITL histogram counts tokens; with 3 tokens per speculative step its step
    (`itl_mean`) is 3 times the histogram's mean, which is what its percentiles compare to."""
    sglang = _itl_lane("sglang")
    assert sglang.figures is not None
    figures = sglang.figures.figures
    assert figures["itl_mean"].value == pytest.approx(0.045)  # the step: 3 tokens of 15 ms
    assert figures["itl_hist_mean"].value == pytest.approx(0.015)
    assert figures["itl_p50"].value == pytest.approx(0.018)
    pane = {line.label: line.values for line in tails_view(sglang).lines if isinstance(line, Cells)}
    assert pane["Inter-token"][:2] == ("15.0 ms", "18.0 ms")
    assert "| Inter-token latency | 15.0 ms | 18.0 ms |" in markdown_receipt(sglang, None)
    vllm = _itl_lane("vllm").figures  # vLLM's histogram counts steps: its mean is the step
    assert vllm is not None and vllm["itl_hist_mean"].value == vllm["itl_mean"].value == 0.015


def test_a_tail_s_query_is_promql_only_where_its_histogram_s_is() -> None:
    scrape = "scrape http://127.0.0.1:42555/metrics: increase per le of vllm:ttft_seconds_bucket"
    promql = 'sum by (le) (increase(vllm:ttft_seconds_bucket{job="a"}[1h]))'
    for source, expected in ((scrape, f"p90 of {scrape}"),
                             (promql, f"histogram_quantile(0.9, {promql})")):  # fmt: skip
        totals = LaneTotals(
            "lane", "vllm", 3600, 2e9, histograms=frozen_map({"ttft": BUCKETS}),
            queries=frozen_map({"ttft": source}),
        )  # fmt: skip
        assert lane_figures(totals)["ttft_p90"].query == expected
