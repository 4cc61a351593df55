"""The figure definitions, held to the seed's own tables (inputs from its section 1-4 totals)."""

from __future__ import annotations

import math

import pytest

from cockpit.figures import (
    Prices,
    bucket_share,
    format_value,
    lane_figures,
    ledger_figures,
    ratio_range,
)
from cockpit.model import LaneTotals, LedgerTotals, TokenCounts, frozen_map

SEED_LEDGER = TokenCounts(
    sessions=3_864,
    api_calls=88_970,
    input=1_550_000_000,
    cache_read=11_790_000_000,
    cache_write=620_000_000,
    output=75_600_000,
    reasoning=19_800_000,
)


def ledger(counts: TokenCounts = SEED_LEDGER, **extra: object) -> LedgerTotals:
    return LedgerTotals(window_s=90 * 86400, end=1_800_000_000.0, total=counts, **extra)  # type: ignore[arg-type]


def test_seed_ledger_table() -> None:
    f = ledger_figures(ledger())
    assert f["prompt_tokens"].value == 13_960_000_000
    assert format_value(f["prompt_tokens"].value, "tokens") == "13.96 B"
    assert format_value(f["cache_read_share"].value, "share") == "84.5%"
    assert f["fresh_prefill_tokens"].value == 2_170_000_000
    assert format_value(f["prompt_output"].value, "ratio") == "185 : 1"
    assert format_value(f["fresh_output"].value, "ratio") == "28.7 : 1"
    assert f["mean_prompt_per_call"].value == pytest.approx(13.96e9 / 88_970)
    assert f["mean_output_per_call"].value == pytest.approx(850, abs=1)


def test_seed_spend_split() -> None:
    f = ledger_figures(ledger())
    shares = {row.bucket: row.share for row in f.spend}
    # The seed's table: 40.1 / 30.4 / 19.8 / 9.7 % from rounded token totals: within 0.3 points.
    assert shares["Input (fresh)"] == pytest.approx(0.401, abs=0.003)
    assert shares["Cache read"] == pytest.approx(0.304, abs=0.003)
    assert shares["Cache write"] == pytest.approx(0.198, abs=0.003)
    assert shares["Output"] == pytest.approx(0.097, abs=0.003)
    assert math.isclose(sum(s or 0 for s in shares.values()), 1.0)
    assert round((f["prompt_side_share"].value or 0) * 100) == 90
    assert round((f["prompt_side_share_uncached"].value or 0) * 100) == 97


def test_prices_are_configurable() -> None:
    free_output = ledger_figures(ledger(), Prices(output=0.0))
    assert free_output["prompt_side_share"].value == 1.0


def test_empty_window_is_missing_not_zero() -> None:
    f = ledger_figures(ledger(TokenCounts()))
    assert f["prompt_output"].missing and "no output" in f["prompt_output"].reason
    assert f["mean_prompt_per_call"].missing
    assert f["sessions"].value == 0


def test_reasoning_missing_on_old_schema() -> None:
    f = ledger_figures(
        ledger(missing=frozen_map({"reasoning": "schema 5 has no reasoning_tokens"}))
    )
    assert f["reasoning_tokens"].missing
    assert "schema 5" in f["reasoning_tokens"].reason


def test_group_ratios_range_and_busiest() -> None:
    cron = TokenCounts(sessions=10, api_calls=100, input=52_000, output=1_000)
    cli = TokenCounts(sessions=5, api_calls=900, input=255_000, output=1_000)
    f = ledger_figures(ledger(by_source=frozen_map({"cron": cron, "cli": cli})))
    assert f.busiest_source == "cli"
    low, high = ratio_range(f.by_source) or (None, None)
    assert low is not None and high is not None
    assert (low.name, high.name) == ("cron", "cli")
    assert low.prompt_output == 52.0 and high.prompt_output == 255.0


SEED_LANE = {
    "requests": 56_882.0,
    "prompt_tokens": 1.107e9,
    "generation_tokens": 20.9e6,
    "prefix_cache_hits": 1.015e9,
    "prefix_cache_queries": 1.108e9,
    "prefill_sum": 13_763.0,
    "prefill_count": 56_882.0,
    "queue_sum": 0.24 * 56_882,
    "queue_count": 56_882.0,
    "decode_sum": 3.48 * 56_882,
    "decode_count": 56_882.0,
    "ttft_sum": 0.57 * 56_882,
    "ttft_count": 56_882.0,
    "itl_sum": 0.0263 * 1000,
    "itl_count": 1000.0,
    "spec_drafts": 1000.0,
    "spec_accepted": 1760.0,
    "spec_draft_tokens": 4009.0,
}


def lane(values: dict[str, float], **extra: object) -> LaneTotals:
    return LaneTotals(
        lane="dsv41", dialect="vllm", window_s=7 * 86400, end=1.8e9,
        values=frozen_map(values), **extra,  # type: ignore[arg-type]
    )  # fmt: skip


def test_seed_lane_tables() -> None:
    f = lane_figures(lane(SEED_LANE))
    assert format_value(f.value("prompt_generated"), "ratio") == "53.0 : 1"
    assert format_value(f.value("prefix_cache_hit_rate"), "share") == "91.6%"
    assert f.value("prefill_computed") == pytest.approx(93e6)
    assert f["prefill_computed"].query == "queries − hits"
    assert f.value("computed_generated") == pytest.approx(4.45, abs=0.05)
    assert f.value("mean_prompt") == pytest.approx(19_461, abs=5)
    assert f.value("mean_generated") == pytest.approx(367, abs=1)
    # decode share: 3.48 / (0.24 + 3.48) = 93.5 %
    assert format_value(f.value("decode_share"), "share") == "93.5%"
    assert f.value("tokens_per_step") == pytest.approx(2.76)
    assert format_value(f.value("draft_acceptance"), "share") == "43.9%"
    assert f.value("stream_tok_s") == pytest.approx(105, abs=0.5)
    assert f.value("effective_prefill_rate") == pytest.approx(6_757, abs=20)
    assert f.value("cache_off_prefill") == pytest.approx(2.9, abs=0.05)


def test_local_compute_preferred_over_queries_minus_hits() -> None:
    f = lane_figures(
        lane({**SEED_LANE, "prompt_computed": 93.2e6}, queries=frozen_map({"prompt_computed": "X"}))
    )
    assert f.value("prefill_computed") == 93.2e6
    assert f["prefill_computed"].query == "X"


def test_absent_metrics_are_missing_with_reason() -> None:
    f = lane_figures(
        lane({"requests": 10.0}, missing=frozen_map({"itl_sum": "not exposed (vllm:x)"}))
    )
    assert f["itl_mean"].missing and "not exposed" in f["itl_mean"].reason
    assert f["prefix_cache_hit_rate"].missing
    # No decode steps seen: tokens per step is unknown, not 1.
    assert f["tokens_per_step"].missing and "not exposed" in f["tokens_per_step"].reason


def test_without_speculative_decoding_a_step_is_one_token() -> None:
    f = lane_figures(lane({"itl_sum": 2.0, "itl_count": 100.0}))
    assert f.value("tokens_per_step") == 1.0
    assert "no speculative decoding" in f["tokens_per_step"].reason
    assert f.value("stream_tok_s") == pytest.approx(50.0)


def test_nan_is_never_a_number() -> None:
    f = lane_figures(lane({"requests": float("nan")}))
    assert f["requests"].missing and "finite" in f["requests"].reason


def test_kv_resident_adds_host_tier() -> None:
    f = lane_figures(lane({"kv_usage": 0.5}, kv_capacity_tokens=4.0e6), host_kv_tokens=1.0e6)
    assert f.value("kv_resident_tokens") == 3.0e6


def test_bucket_shares_use_server_bounds() -> None:
    inf = float("inf")
    buckets = ((200.0, 30.0), (500.0, 50.0), (1000.0, 60.0), (10_000.0, 86.4), (inf, 100.0))
    assert bucket_share(buckets, 500, above=False) == (0.5, 500.0)
    share, bound = bucket_share(buckets, 10_000, above=True)
    assert share == pytest.approx(0.136) and bound == 10_000.0
    # A threshold between bounds uses the largest bound below it, and says which.
    assert bucket_share(buckets, 800, above=False) == (0.5, 500.0)
    assert bucket_share((), 500, above=False) == (None, None)


def test_length_share_labels_follow_bounds() -> None:
    inf = float("inf")
    hist = ((400.0, 5.0), (8_000.0, 9.0), (inf, 10.0))
    f = lane_figures(lane({"requests": 10.0}, histograms=frozen_map({"prompt_len": hist})))
    assert f.value("prompt_share_short") == 0.5
    assert "400" in f["prompt_share_short"].label
    assert f.value("prompt_share_long") == pytest.approx(0.1)
    assert "8,000" in f["prompt_share_long"].label


def test_measured_point_only_when_counters_move() -> None:
    idle = lane_figures(lane({"flops": 0.0, "read_bytes": 0.0, "write_bytes": 0.0}))
    assert idle["measured_flops"].missing and "not moving" in idle["measured_flops"].reason
    busy = lane_figures(lane({"flops": 6.048e17, "read_bytes": 6.048e14, "write_bytes": 0.0}))
    assert busy.value("measured_flops") == pytest.approx(1e12)
    assert busy.value("measured_bytes") == pytest.approx(1e9)


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (1.107e9, "tokens", "1.107 B"),
        (20.9e6, "tokens", "20.9 M"),
        (19_464, "tokens", "19,464"),
        (0.916, "share", "91.6%"),
        (0.24, "seconds", "0.24 s"),
        (0.0263, "seconds", "26.3 ms"),
        (None, "tokens", "—"),
    ],
)
def test_formatting(value: float | None, unit: str, text: str) -> None:
    assert format_value(value, unit) == text  # type: ignore[arg-type]
