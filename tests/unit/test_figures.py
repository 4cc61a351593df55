"""The figure definitions, held to the seed's own tables (inputs from its section 1-4 totals)."""

from __future__ import annotations

import math
import re
from collections import defaultdict

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cockpit.core.catalogue import bucket_share, merge_reasons
from cockpit.core.figures import format_value, lane_figures, lane_load
from cockpit.core.ledger_figures import Prices, ledger_figures, ratio_range
from cockpit.core.model import Bucket, LaneTotals, LedgerTotals, TokenCounts, frozen_map
from cockpit.roofline.model import Hardware, ModelProfile, operating_points
from cockpit.roofline.table import percent_text
from cockpit.runtime.report import lane_markdown
from cockpit.sources.scrape import ScrapeSource
from tests.support.repo import VLLM_FIXTURES, require_fixture

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
    assert format_value(f["prompt_tokens"].value, "tokens") == "13.96 G"
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


# The seed's lane drafts at every step: 2.76 tokens per step of 26.3 ms. Its ITL count is the
# decode steps that carried the tokens after each request's first.
SEED_STEPS = (20.9e6 - 56_882) / 2.76
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
    "itl_sum": 0.0263 * SEED_STEPS,
    "itl_count": SEED_STEPS,
    "spec_drafts": SEED_STEPS,
    "spec_accepted": 1.76 * SEED_STEPS,
    "spec_draft_tokens": 4.009 * SEED_STEPS,
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
    # One prompt lies past 8,000, the largest bound: its share above 10k can't be told.
    for key, threshold in (("prompt_share_long", "10,000"), ("prompt_share_huge", "100,000")):
        assert f[key].missing, key
        assert f[key].reason == "the engine's largest prompt bucket is 8,000"
        assert f"> {threshold} tokens" in f[key].label
    # Two thresholds that fall back to the same bound are one row, not the same row twice.
    gen = ((100.0, 4.0), (600.0, 9.0), (inf, 10.0))
    g = lane_figures(lane({"requests": 10.0}, histograms=frozen_map({"gen_len": gen})))
    assert g["gen_share_short"].value == 0.4 and "≤ 100 tokens" in g["gen_share_short"].label
    assert g["gen_share_medium"].missing and "≤ 5,000 tokens" in g["gen_share_medium"].label
    assert g["gen_share_medium"].reason == "the engine's largest generation bucket is 600"
    dup = ((100.0, 4.0), (20_000.0, 10.0), (inf, 10.0))
    d = lane_figures(lane({"requests": 10.0}, histograms=frozen_map({"gen_len": dup})))
    assert d["gen_share_medium"].missing
    assert "no generation bucket between 100 and 5,000" in d["gen_share_medium"].reason


def test_measured_point_only_when_counters_move() -> None:
    idle = lane_figures(lane({"flops": 0.0, "read_bytes": 0.0, "write_bytes": 0.0}))
    assert idle["measured_flops"].missing and "not moving" in idle["measured_flops"].reason
    busy = lane_figures(lane({"flops": 6.048e17, "read_bytes": 6.048e14, "write_bytes": 0.0}))
    assert busy.value("measured_flops") == pytest.approx(1e12)
    assert busy.value("measured_bytes") == pytest.approx(1e9)


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (1.107e9, "tokens", "1.107 G"),
        (20.9e6, "tokens", "20.9 M"),
        (19_464, "tokens", "19,464"),
        (0.916, "share", "91.6%"),
        (0.24, "seconds", "0.24 s"),
        (0.0263, "seconds", "26.3 ms"),
        (36.7e-6, "seconds", "37 µs"),
        (0.0, "seconds", "0.0 ms"),
        (None, "tokens", "—"),
        (1e9, "bytes/s", "1 GB/s"),
        (950.0, "bytes/s", "950 B/s"),
        (1.6e9, "flop/s", "1.6 GFLOP/s"),
        (3.2e15, "flop/s", "3.2 PFLOP/s"),
        (25e9, "bytes", "25 GB"),
        (999_999.0, "bytes", "1 MB"),
        (12_500.0, "tok/s", "12.5 k tok/s"),
        (2.4e6, "tok/s", "2.4 M tok/s"),
    ],
)
def test_formatting(value: float | None, unit: str, text: str) -> None:
    assert format_value(value, unit) == text  # type: ignore[arg-type]


# --- the real vLLM expositions -------------------------------------------------------------


def exposition(name: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> (labels, value) of a real /metrics text, read by prometheus_client."""
    text = require_fixture(VLLM_FIXTURES / name).read_text()
    samples: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name].append((sample.labels, sample.value))
    return samples


def total(samples: dict[str, list[tuple[dict[str, str], float]]], name: str) -> float:
    return sum(value for _, value in samples[name])


def buckets(
    samples: dict[str, list[tuple[dict[str, str], float]]], base: str
) -> tuple[Bucket, ...]:
    return tuple(
        sorted((float(labels["le"]), value) for labels, value in samples[f"{base}_bucket"])
    )


SPEC_NAMES = {
    "spec_drafts": "vllm:spec_decode_num_drafts_total",
    "spec_draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "spec_accepted": "vllm:spec_decode_num_accepted_tokens_total",
}


def real_lane(name: str, **extra: float) -> LaneTotals:
    """The figures' inputs straight from a real exposition (a first scrape: since start)."""
    s = exposition(name)
    values = {
        "requests": total(s, "vllm:request_success_total"),
        "generation_tokens": total(s, "vllm:generation_tokens_total"),
        "ttft_count": total(s, "vllm:time_to_first_token_seconds_count"),
        "itl_sum": total(s, "vllm:inter_token_latency_seconds_sum"),
        "itl_count": total(s, "vllm:inter_token_latency_seconds_count"),
        "prompt_len_sum": total(s, "vllm:request_prompt_tokens_sum"),
        "prompt_len_count": total(s, "vllm:request_prompt_tokens_count"),
        "gen_len_sum": total(s, "vllm:request_generation_tokens_sum"),
        "gen_len_count": total(s, "vllm:request_generation_tokens_count"),
        **extra,
    }
    missing = {}
    for key, metric in SPEC_NAMES.items():
        if metric in s:
            values[key] = total(s, metric)
        else:
            missing[key] = f"not exposed by this engine ({metric})"
    histograms = {
        "prompt_len": buckets(s, "vllm:request_prompt_tokens"),
        "gen_len": buckets(s, "vllm:request_generation_tokens"),
    }
    return lane(values, missing=frozen_map(missing), histograms=frozen_map(histograms))


def test_speculative_tokens_per_step_are_measured_per_engine_step() -> None:
    s = exposition("metrics_real_specdec.txt")
    # vLLM observes ITL once per request per engine step; the tokens after each request's
    # first are its finished requests' generated tokens less one each (all 96 finished).
    decoded = total(s, "vllm:request_generation_tokens_sum") - total(
        s, "vllm:request_generation_tokens_count"
    )
    steps = total(s, "vllm:inter_token_latency_seconds_count")
    decode_seconds = total(s, "vllm:request_decode_time_seconds_sum")
    f = lane_figures(real_lane("metrics_real_specdec.txt"))
    assert f.value("tokens_per_step") == pytest.approx(decoded / steps)
    assert f.value("stream_tok_s") == pytest.approx(decoded / decode_seconds)
    assert format_value(f.value("tokens_per_step"), "number") == "1.53"
    assert format_value(f.value("stream_tok_s"), "tok/s") == "41 tok/s"
    # Counting only the steps that drafted would claim far more (791 of 3,946 drafted here).
    drafted = 1 + total(s, SPEC_NAMES["spec_accepted"]) / total(s, SPEC_NAMES["spec_drafts"])
    assert drafted > 2 * (f.value("tokens_per_step") or 0)
    accepted, proposed = (
        total(s, SPEC_NAMES["spec_accepted"]),
        total(s, SPEC_NAMES["spec_draft_tokens"]),
    )
    assert f.value("draft_acceptance") == pytest.approx(accepted / proposed)


def test_without_speculation_the_real_lane_steps_one_token() -> None:
    s = exposition("metrics_real.txt")
    f = lane_figures(real_lane("metrics_real.txt"))
    assert f.value("tokens_per_step") == 1.0
    itl_sum = total(s, "vllm:inter_token_latency_seconds_sum")
    itl_count = total(s, "vllm:inter_token_latency_seconds_count")
    assert f.value("stream_tok_s") == pytest.approx(itl_count / itl_sum)
    assert f.value("itl_mean") == pytest.approx(itl_sum / itl_count)


def test_roofline_decode_point_follows_measured_tokens_per_step() -> None:
    s = exposition("metrics_real_specdec.txt")
    decoded = total(s, "vllm:request_generation_tokens_sum") - total(
        s, "vllm:request_generation_tokens_count"
    )
    steps = total(s, "vllm:inter_token_latency_seconds_count")
    f = lane_figures(real_lane("metrics_real_specdec.txt", running=8.0))
    load = lane_load(f)
    assert load.tokens_per_step == pytest.approx(decoded / steps)
    hw = Hardware("h100", "H100 SXM", 989e12, 3.35e12, 80e9)
    model = ModelProfile("llama-3.1-8b", "Llama 3.1 8B", 8.03e9, 8.03e9, 2, 32, 4096, 131_072)
    decode = operating_points(load, hw, model).decode
    assert decode is not None
    decode_seconds = total(s, "vllm:request_decode_time_seconds_sum")
    assert decode.tokens_per_s_per_stream == pytest.approx(decoded / decode_seconds)


def test_length_thresholds_past_the_largest_bucket_are_not_relabelled() -> None:
    s = exposition("metrics_real.txt")
    prompt = buckets(s, "vllm:request_prompt_tokens")
    largest, within = [(le, n) for le, n in prompt if math.isfinite(le)][-1]
    assert within == prompt[-1][1]  # every prompt of this lane is within its largest bound
    f = lane_figures(real_lane("metrics_real.txt"))
    shares = [f[key] for key in ("prompt_share_short", "prompt_share_long", "prompt_share_huge")]
    assert len({figure.label for figure in shares}) == 3
    assert "> 10,000 tokens" in f["prompt_share_long"].label
    assert "> 100,000 tokens" in f["prompt_share_huge"].label
    # Nothing past the largest bound: none of them is past 10k either, exactly.
    assert f.value("prompt_share_long") == 0.0 and f.value("prompt_share_huge") == 0.0
    assert f"{largest:,.0f}" in f["prompt_share_long"].reason
    # The same lane with prompts past its largest bound: the share above 10k is unknown.
    spilled = (*prompt[:-1], (math.inf, prompt[-1][1] + 5))
    over = lane_figures(
        lane({"requests": spilled[-1][1]}, histograms=frozen_map({"prompt_len": spilled}))
    )
    for key in ("prompt_share_long", "prompt_share_huge"):
        assert over[key].missing
        assert over[key].reason == f"the engine's largest prompt bucket is {largest:,.0f}"


def test_merge_reasons_says_each_cause_once() -> None:
    assert merge_reasons(["needs a second scrape", "needs a second scrape"]) == (
        "needs a second scrape"
    )
    assert (
        merge_reasons(
            [
                "not exposed by this engine (vllm:a)",
                "no data",
                "not exposed by this engine (vllm:b)",
            ]
        )
        == "not exposed by this engine (vllm:a, vllm:b); no data"
    )
    assert merge_reasons(["x (a)", "x (a)"]) == "x (a)"
    assert merge_reasons([]) == ""


def test_figure_reasons_are_not_doubled() -> None:
    twice = frozen_map({"prompt_tokens": "needs a second scrape",
                        "generation_tokens": "needs a second scrape"})  # fmt: skip
    f = lane_figures(lane({}, missing=twice))
    assert f["prompt_generated"].reason == "needs a second scrape"
    real = lane_figures(real_lane("metrics_real.txt"))
    accepted, proposed = SPEC_NAMES["spec_accepted"], SPEC_NAMES["spec_draft_tokens"]
    assert real["draft_acceptance"].reason == (
        f"not exposed by this engine ({accepted}, {proposed})"
    )


def test_sglang_lane_reads_itl_per_token() -> None:
    # SGLang adds each output's interval to ITL's sum once and its tokens to the count:
    # 300 verify steps of 2.5 tokens in 20 ms each.
    verify, tokens, seconds = 300.0, 750.0, 300 * 0.020
    f = lane_figures(
        LaneTotals(
            lane="s", dialect="sglang", window_s=3600, end=1.8e9,
            values=frozen_map({"itl_sum": seconds, "itl_count": tokens, "spec_drafts": verify,
                               "spec_accepted": tokens - verify}),
        )
    )  # fmt: skip
    assert f.value("tokens_per_step") == pytest.approx(2.5)
    assert f.value("itl_mean") == pytest.approx(0.020)
    assert f.value("stream_tok_s") == pytest.approx(tokens / seconds)


@pytest.mark.parametrize(
    ("share", "text"), [(0.032, "3.2 %"), (0.35, "35 %"), (816.14, "81,614 %"), (-0.2, "-20 %")]
)
def test_roofline_percentages_group_their_thousands(share: float, text: str) -> None:
    assert percent_text(share) == text


def test_measured_bytes_name_their_own_counters_when_missing() -> None:
    missing = {
        key: f"not exposed by this engine (vllm:estimated_{key}_per_gpu_total)"
        for key in ("flops", "read_bytes", "write_bytes")
    }
    f = lane_figures(lane({}, missing=frozen_map(missing)))
    assert f["measured_flops"].reason == missing["flops"]
    said = f["measured_bytes"].reason
    assert said.startswith("not exposed by this engine (vllm:estimated_read_bytes_per_gpu_total")
    assert "estimated_write_bytes" in said
    bytes_only = {key: reason for key, reason in missing.items() if key != "flops"}
    moving = lane({"flops": 1e15}, missing=frozen_map(bytes_only))
    assert "flops" not in lane_figures(moving)["measured_bytes"].reason


# --- what else the engine says ----------------------------------------

SGLANG_FIXTURE = VLLM_FIXTURES.parent / "sglang" / "metrics_tp2.txt"
COUNTED = re.compile(r"^(\S+_(?:total|sum|count|bucket)(?:\{[^}]*\})?) \S+$", re.MULTILINE)


def scraped(text: str, at: float) -> LaneTotals:
    """A lane read by direct scrape: the exposition at `at`, its counters at 0 a minute before
    (an engine without `_created`: the minute's increase is then the exposition's value)."""
    source = ScrapeSource("http://127.0.0.1:1/metrics")
    source.ingest(COUNTED.sub(r"\1 0.0", text), at - 60)
    source.ingest(text, at)
    return source.totals("lane", "", 3600, at)


def test_the_real_vllm_exposition_says_how_requests_finished_and_where_the_cache_hit() -> None:
    s = exposition("metrics_real_specdec.txt")
    text = require_fixture(VLLM_FIXTURES / "metrics_real_specdec.txt").read_text()
    totals = scraped(re.sub(r"^\S+_created(\{[^}]*\})? \S+\n", "", text, flags=re.M), 2e9)
    figures = lane_figures(totals)
    value = figures.value

    def by(name: str, label: str, wanted: str) -> float:
        return sum(v for labels, v in s[name] if labels.get(label) == wanted)

    reasons = "vllm:request_success_total"
    assert value("finished_length") == by(reasons, "finished_reason", "length") == 96
    assert value("finished_stop") == value("finished_repetition") == 0
    assert value("finished_failed_share") == 0.0
    cached = "vllm:prompt_tokens_cached_by_source_total"
    assert value("cached_device") == by(cached, "source", "device") > 0
    assert value("cached_host") == value("cached_disk") == 0
    assert value("prompt_from_local_cache_hit") == by(
        "vllm:prompt_tokens_by_source_total", "source", "local_cache_hit"
    )
    drafts = total(s, "vllm:spec_decode_num_drafts_total")
    per_pos = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
    assert value("draft_acceptance_pos_0") == pytest.approx(by(per_pos, "position", "0") / drafts)
    positions = [k for k in figures.engine_keys if k.startswith("draft_acceptance_pos_")]
    assert positions == [
        "draft_acceptance_pos_0",
        "draft_acceptance_pos_1",
        "draft_acceptance_pos_2",
    ]
    assert value("sleep_awake") == 1.0 and value("sleep_discard_all") == 0.0
    assert value("waiting_capacity") == value("waiting_deferred") == 0.0
    assert value("admission_rejections") == 0
    assert (
        figures["admission_rejections"].reason == "max_num_queued_reqs 0, max_num_queued_tokens 0"
    )
    steps = total(s, "vllm:iteration_tokens_total_sum") / total(
        s, "vllm:iteration_tokens_total_count"
    )
    assert value("batch_tokens_per_step") == pytest.approx(steps)
    e2e = "vllm:e2e_request_latency_seconds"
    assert value("e2e_mean") == pytest.approx(total(s, f"{e2e}_sum") / total(s, f"{e2e}_count"))
    assert totals.histograms["e2e"][-1] == (math.inf, total(s, f"{e2e}_count"))
    assert figures["external_cache_hit_rate"].missing  # no KV connector: nothing queried
    receipt = "\n".join(lane_markdown(figures, totals, "1h"))
    assert "| Finished: length | 96 |" in receipt
    assert "| Draft acceptance at position 0 |" in receipt


def test_a_lane_without_the_newer_metrics_says_why_each_is_missing() -> None:
    figures = lane_figures(real_lane("metrics_real.txt"))
    assert figures["finished_stop"].reason == "no data in window"
    assert figures["sleep_awake"].missing and figures["e2e_mean"].missing
    why = "SGLang does not count finished requests by reason"
    sglang = lane_figures(lane({}, missing=frozen_map({"finished": why})))
    assert sglang["finished_abort"].reason == sglang["finished_failed_share"].reason == why


def test_sglang_recorded_from_its_source() -> None:
    totals = scraped(require_fixture(SGLANG_FIXTURE).read_text(), 2e9)
    assert totals.dialect == "sglang"
    figures = lane_figures(totals)
    value = figures.value
    # Every TP rank exports the scheduler's gauges: one rank counts, not their sum.
    assert value("running") == 6 and value("waiting") == 2
    assert totals.kv_capacity_tokens == 80_000 and value("kv_resident_tokens") == 40_000
    # token_usage (0.8) is the fullest pool (SWA here): KV use is the full-attention pool's.
    assert value("kv_usage") == 0.5
    assert value("preemptions") == 3 and figures["preemptions"].reason == "retracted requests"
    # 5000 generated, 2000 verify steps, 50 requests whose first token came from prefill.
    assert value("tokens_per_step") == pytest.approx(1 + 2950 / 2000)
    assert value("draft_acceptance") == pytest.approx(2950 / (2000 * 3))
    assert figures["draft_acceptance"].reason.startswith("estimate")
    # Non-streaming requests observe TTFT late (mean 4 s here): streaming ones only.
    assert value("ttft_mean") == 0.5 and "is_streaming" in figures["ttft_mean"].reason
    assert value("e2e_mean") == 3.0
    assert value("decode_mean") == 2.5 and figures["decode_mean"].reason.startswith("derived")
    # prefill_effective_tokens: the 6000 tokens recomputed after retraction are not counted.
    assert value("prefix_cache_hit_rate") == 0.6 and value("prefill_computed") == 20_000
    assert value("cached_device") == 24_000 and value("cached_host") == 6_000


def test_an_older_sglang_falls_back_per_figure() -> None:
    text = require_fixture(SGLANG_FIXTURE).read_text()
    newer = ("full_token_usage", "prefill_effective", "realtime_tokens")
    lines = [
        line.replace(',is_streaming="true"', "")
        for line in text.splitlines()
        if not any(name in line for name in newer) and 'is_streaming="false"' not in line
    ]
    figures = lane_figures(scraped("\n".join(lines) + "\n", 2e9))
    assert figures.value("kv_usage") == 0.8  # token_usage, the only one there is
    assert figures.value("kv_resident_tokens") == pytest.approx(0.8 * 80_000)
    assert figures.value("ttft_mean") == 0.5  # the unlabelled series
    assert figures.value("prefix_cache_hit_rate") == pytest.approx(24_000 / 40_000)
    assert figures.value("prefill_computed") == 16_000  # prompt - cached
