"""The mini roofline against the seed's own numbers (Llama 3.1 8B BF16 on an H100).

Expected values are the seed's stated figures with the seed's rounding as the tolerance, or
the seed's formulas written out again here; nothing is read back from the code under test.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cockpit.cli.main import main
from cockpit.roofline.model import (
    Hardware,
    LaneLoad,
    ModelProfile,
    RooflineView,
    decode_step,
    operating_points,
    prefill_pass,
)
from cockpit.roofline.profiles import find_hardware, find_model
from cockpit.roofline.table import profiles_listing, rate_text, roofline_table

# The seed's inputs.
P = 8.03e9
LAYERS = 32
HIDDEN = 4096
K = 128 * 1024  # KV bytes per token
PEAK = 989e12
BW = 3.35e12
WEIGHTS = P * 2

H100 = Hardware("h100", "H100 SXM", PEAK, BW, 80e9)
LLAMA_8B = ModelProfile("llama-3.1-8b", "Llama 3.1 8B", P, P, 2, LAYERS, HIDDEN, K)
LLAMA_8B_INT8 = ModelProfile("llama-3.1-8b-int8", "Llama 3.1 8B INT8", P, P, 1, LAYERS, HIDDEN, K)

SHORT_PROMPT = 34
"""The seed's short measured prompt: decode at batch 1 is quoted for a near-empty cache."""
FILM_CONTEXT = 256
"""A per-sequence context that reproduces the seed's 5.4 ms at batch 64 (222-262 all do)."""


def seed_prefill_flops(n: float) -> float:
    return 2 * P * n + 2 * LAYERS * HIDDEN * n**2


def seed_decode_flops(batch: float, context: float) -> float:
    """2·P per token plus Q·Kᵀ and A·V over the context: 4·L·d·C per token."""
    return batch * (2 * P + 4 * LAYERS * HIDDEN * context)


def seed_decode_bytes(batch: float, context: float, weights: float = WEIGHTS) -> float:
    return weights + batch * context * K


# --- the roofline ---------------------------------------------------------------------------


def test_h100_ridge_is_295() -> None:
    assert round(H100.ridge) == 295
    assert H100.ridge == pytest.approx(PEAK / BW)


def test_roof_is_memory_slope_then_flat() -> None:
    assert H100.attainable(1.0) == pytest.approx(BW)
    assert H100.attainable(100.0) == pytest.approx(100 * BW)
    assert H100.attainable(10_000.0) == PEAK


# --- prefill ----------------------------------------------------------------------------------


def test_prefill_2000_tokens_is_33_tflop_in_34_ms() -> None:
    point = prefill_pass(H100, LLAMA_8B, 2000)
    assert point.flops == pytest.approx(33e12, abs=0.5e12)  # "33 trillion operations"
    assert point.seconds == pytest.approx(34e-3, abs=1e-3)  # "about 34 milliseconds"
    assert point.intensity == pytest.approx(2000, rel=0.05)  # "does about 2,000"
    assert point.bound == "compute"
    assert point.pct_of_roof == pytest.approx(100)


def test_prefill_matches_the_seed_formula() -> None:
    for n in (1, 500, 2000, 32_768):
        point = prefill_pass(H100, LLAMA_8B, n)
        assert point.flops == pytest.approx(seed_prefill_flops(n))
        assert point.bytes_moved == pytest.approx(WEIGHTS)
        expected = max(seed_prefill_flops(n) / PEAK, WEIGHTS / BW)
        assert point.seconds == pytest.approx(expected)


def test_attention_is_a_thirtieth_at_2000_and_a_third_at_32768() -> None:
    assert 1 / prefill_pass(H100, LLAMA_8B, 2000).attention_share == pytest.approx(30, abs=2)
    assert prefill_pass(H100, LLAMA_8B, 32_768).attention_share == pytest.approx(1 / 3, abs=0.02)
    assert prefill_pass(H100, LLAMA_8B, 32_768).attention_share == pytest.approx(
        2 * LAYERS * HIDDEN * 32_768**2 / seed_prefill_flops(32_768)
    )


def test_prefill_after_a_cached_prefix_costs_the_extra_attention() -> None:
    fresh, prefix = 1000, 3000
    point = prefill_pass(H100, LLAMA_8B, fresh, prefix=prefix)
    whole, cached = seed_prefill_flops(prefix + fresh), seed_prefill_flops(prefix)
    assert point.flops == pytest.approx(whole - cached)


# --- decode -----------------------------------------------------------------------------------


def test_decode_batch_1_is_one_op_per_byte_4_8_ms_209_tok_s() -> None:
    step = decode_step(H100, LLAMA_8B, 1, SHORT_PROMPT)
    assert step.flops == pytest.approx(16e9, abs=0.5e9)  # "16 billion operations"
    assert step.intensity == pytest.approx(1.0, abs=0.05)
    assert step.seconds == pytest.approx(4.8e-3, abs=0.05e-3)
    assert step.tokens_per_s == pytest.approx(209, abs=1)
    assert step.bound == "memory"


def test_decode_batch_64_is_5_4_ms_and_over_11000_tok_s() -> None:
    one = decode_step(H100, LLAMA_8B, 1, FILM_CONTEXT)
    many = decode_step(H100, LLAMA_8B, 64, FILM_CONTEXT)
    assert one.seconds == pytest.approx(4.8e-3, abs=0.05e-3)
    assert many.seconds == pytest.approx(5.4e-3, abs=0.05e-3)
    assert many.tokens_per_s > 11_000


def test_decode_at_295_users_stays_memory_bound() -> None:
    assert decode_step(H100, LLAMA_8B, 295, FILM_CONTEXT).intensity < PEAK / BW


def test_decode_matches_the_formulas() -> None:
    for batch, context in ((1, 0), (8, 3000), (64, 16_361)):
        step = decode_step(H100, LLAMA_8B, batch, context)
        flops, moved = seed_decode_flops(batch, context), seed_decode_bytes(batch, context)
        assert step.flops == pytest.approx(flops)
        assert step.bytes_moved == pytest.approx(moved)
        assert step.seconds == pytest.approx(max(flops / PEAK, moved / BW))
        assert step.tokens_per_s == pytest.approx(batch / max(flops / PEAK, moved / BW))


def test_16361_token_context_adds_2_1_gb_and_13_percent_bytes() -> None:
    step = decode_step(H100, LLAMA_8B, 1, 16_361)
    assert step.kv_bytes == pytest.approx(2.1e9, abs=0.05e9)
    assert step.kv_over_weights == pytest.approx(0.13, abs=0.005)
    assert LLAMA_8B.kv_bytes(16_361) == pytest.approx(16_361 * K)
    short = decode_step(H100, LLAMA_8B, 1, SHORT_PROMPT)
    assert step.seconds / short.seconds - 1 == pytest.approx(0.13, abs=0.005)
    assert step.kv_share == pytest.approx(16_361 * K / (WEIGHTS + 16_361 * K))


def test_int8_weights_roughly_double_batch_1_decode() -> None:
    bf16 = decode_step(H100, LLAMA_8B, 1, SHORT_PROMPT).tokens_per_s
    int8 = decode_step(H100, LLAMA_8B_INT8, 1, SHORT_PROMPT).tokens_per_s
    assert int8 / bf16 == pytest.approx(2.0, abs=0.05)


def test_speculative_decoding_multiplies_tokens_per_memory_bound_step() -> None:
    plain = decode_step(H100, LLAMA_8B, 4, 2000)
    spec = decode_step(H100, LLAMA_8B, 4, 2000, tokens_per_step=2.5)
    assert spec.seconds == pytest.approx(plain.seconds)  # still one read of weights and KV
    assert spec.tokens_per_s == pytest.approx(2.5 * plain.tokens_per_s)
    assert spec.intensity == pytest.approx(2.5 * plain.intensity)


def test_moe_reads_active_weights_at_batch_1_and_all_of_them_once_batched() -> None:
    moe = ModelProfile("moe", "MoE", 671e9, 37e9, 1, 61, 7168, 70_272)
    assert decode_step(H100, moe, 1, 0).weight_bytes == pytest.approx(37e9)
    assert decode_step(H100, moe, 4, 0).weight_bytes == pytest.approx(4 * 37e9)
    assert decode_step(H100, moe, 64, 0).weight_bytes == pytest.approx(671e9)
    assert prefill_pass(H100, moe, 2000).bytes_moved == pytest.approx(671e9)
    assert prefill_pass(H100, moe, 2000).flops == pytest.approx(
        2 * 37e9 * 2000 + 2 * 61 * 7168 * 2000**2
    )


@given(
    batch=st.integers(1, 512),
    context=st.integers(0, 200_000),
    tokens_per_step=st.floats(1.0, 4.0),
)
def test_roof_points_sit_on_the_roof(batch: int, context: int, tokens_per_step: float) -> None:
    step = decode_step(H100, LLAMA_8B, batch, context, tokens_per_step=tokens_per_step)
    assert step.achieved_flops_per_s <= PEAK * (1 + 1e-9)
    assert step.pct_of_roof == pytest.approx(100)
    assert 0 <= step.kv_share < 1
    wider = decode_step(H100, LLAMA_8B, batch + 1, context, tokens_per_step=tokens_per_step)
    assert wider.tokens_per_s >= step.tokens_per_s * (1 - 1e-12)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError):
        prefill_pass(H100, LLAMA_8B, 0)
    with pytest.raises(ValueError):
        decode_step(H100, LLAMA_8B, 0, 100)
    with pytest.raises(ValueError):
        H100.scaled(0)


def test_scaled_hardware_sums_the_roofs() -> None:
    eight = H100.scaled(8)
    assert eight.peak_flops == 8 * PEAK
    assert eight.bandwidth == 8 * BW
    assert eight.ridge == pytest.approx(PEAK / BW)


# --- live operating points --------------------------------------------------------------------

LOAD = LaneLoad(
    effective_prefill_rate=10_000.0,
    mean_prompt=3000.0,
    mean_fresh_prefill=1000.0,
    mean_generated=400.0,
    running=8.0,
    itl_s=0.010,
    tokens_per_step=1.5,
    measured_flops_per_s=2.0e14,
    measured_bytes_per_s=2.0e12,
)


def test_prefill_operating_point() -> None:
    points = operating_points(LOAD, H100, LLAMA_8B, chunk_tokens=512)
    prefill = points.prefill
    assert prefill is not None and points.prefill_reason == ""
    # computed tokens sit between the 2,000 cached and the 3,000th: mean position 2,500
    per_token = 2 * P + 4 * LAYERS * HIDDEN * 2500
    assert prefill.achieved_flops_per_s == pytest.approx(10_000 * per_token)
    assert prefill.intensity == pytest.approx(512 * per_token / WEIGHTS)
    attainable = min(PEAK, 512 * per_token / WEIGHTS * BW)
    assert prefill.pct_of_roof == pytest.approx(100 * 10_000 * per_token / attainable)


def test_prefill_intensity_falls_back_to_the_fresh_prefill_per_request() -> None:
    prefill = operating_points(LOAD, H100, LLAMA_8B).prefill
    assert prefill is not None
    per_token = 2 * P + 4 * LAYERS * HIDDEN * 2500
    assert prefill.intensity == pytest.approx(1000 * per_token / WEIGHTS)


def test_decode_operating_point_and_its_ceiling() -> None:
    points = operating_points(LOAD, H100, LLAMA_8B)
    decode = points.decode
    assert decode is not None and points.decode_reason == ""
    context = 3000 + 400 / 2
    flops = 8 * 1.5 * (2 * P + 4 * LAYERS * HIDDEN * context)
    moved = WEIGHTS + 8 * context * K
    assert decode.batch == 8 and decode.context == context
    assert decode.achieved_flops_per_s == pytest.approx(flops / 0.010)
    assert decode.intensity == pytest.approx(flops / moved)
    assert decode.tokens_per_s == pytest.approx(8 * 1.5 / 0.010)
    assert decode.pct_of_roof == pytest.approx(
        100 * (flops / 0.010) / min(PEAK, flops / moved * BW)
    )
    ceiling = points.decode_ceiling_tokens_per_s
    assert ceiling == pytest.approx(8 * 1.5 / max(flops / PEAK, moved / BW))


def test_measured_point_and_its_ratio_to_the_model() -> None:
    points = operating_points(LOAD, H100, LLAMA_8B, chunk_tokens=512)
    measured = points.measured
    assert measured is not None
    assert measured.intensity == pytest.approx(100.0)
    assert measured.pct_of_roof == pytest.approx(100 * 2.0e14 / min(PEAK, 100.0 * BW))
    context = 3200.0
    decode_flops_s = 8 * 1.5 * (2 * P + 4 * LAYERS * HIDDEN * context) / 0.010
    prefill_flops_s = 10_000 * (2 * P + 4 * LAYERS * HIDDEN * 2500)
    assert measured.flops_ratio == pytest.approx(2.0e14 / (decode_flops_s + prefill_flops_s))


@pytest.mark.parametrize(
    ("change", "which", "reason"),
    [
        ({"effective_prefill_rate": None}, "prefill", "effective prefill rate missing"),
        ({"effective_prefill_rate": 0.0}, "prefill", "no prefill in the window"),
        ({"mean_fresh_prefill": None}, "prefill", "no chunk size and no mean fresh prefill"),
        ({"mean_fresh_prefill": 0.0}, "prefill", "every prompt token came from the cache"),
        ({"itl_s": None}, "decode", "inter-token step missing"),
        ({"running": 0.0}, "decode", "no requests running"),
        ({"running": None}, "decode", "running requests missing"),
        ({"mean_prompt": None}, "decode", "mean prompt length missing"),
        ({"mean_generated": None}, "decode", "mean generated length missing"),
        ({"measured_flops_per_s": None}, "measured", "measured FLOP/s missing"),
        ({"measured_flops_per_s": 0.0}, "measured", "not moving"),
        ({"measured_bytes_per_s": None}, "measured", "measured bytes/s missing"),
    ],
)
def test_missing_inputs_leave_a_reason(
    change: dict[str, float | None], which: str, reason: str
) -> None:
    load = replace(LOAD, **change)
    points = operating_points(load, H100, LLAMA_8B)
    assert getattr(points, which) is None
    assert reason in getattr(points, f"{which}_reason")


def test_a_mean_batch_below_one_decodes_as_one() -> None:
    load = LaneLoad(mean_prompt=100.0, mean_generated=50.0, running=0.3, itl_s=0.005)
    decode = operating_points(load, H100, LLAMA_8B).decode
    assert decode is not None and decode.batch == 1
    assert decode.tokens_per_step == 1.0


def test_an_empty_load_gives_no_points() -> None:
    points = operating_points(LaneLoad(), H100, LLAMA_8B)
    assert points.prefill is None and points.decode is None and points.measured is None
    assert points.decode_ceiling_tokens_per_s is None


# --- the text table -----------------------------------------------------------------------------


def test_table_shows_the_seed_numbers() -> None:
    text = roofline_table(H100, LLAMA_8B, prompt=2000, batch=1, context=SHORT_PROMPT)
    assert f"{round(PEAK / BW)} FLOP/byte" in text
    assert f"{seed_prefill_flops(2000) / 1e12:.1f} TFLOP" in text
    assert f"{seed_prefill_flops(2000) / PEAK * 1e3:.1f} ms" in text
    assert f"{seed_prefill_flops(2000) / WEIGHTS:,.0f} FLOP/byte" in text
    step = seed_decode_bytes(1, SHORT_PROMPT) / BW
    assert f"{step * 1e3:.2f} ms" in text
    assert f"{1 / step:,.0f} tok/s" in text
    share = 2 * LAYERS * HIDDEN * 2000**2 / seed_prefill_flops(2000)
    assert f"{100 * share:.1f} %" in text
    assert "compute bound" in text and "memory bound" in text


def test_table_decode_context_defaults_to_the_prompt() -> None:
    text = roofline_table(H100, LLAMA_8B, prompt=16_361, batch=64)
    assert "batch 64, context 16,361" in text
    kv = 64 * 16_361 * K
    assert f"KV {kv / 1e9:.0f} GB" in text  # three significant digits
    assert f"{100 * kv / (WEIGHTS + kv):.0f} % of the bytes" in text
    assert "does NOT fit" in text  # 16 GB of weights + 137 GB of KV on an 80 GB card


@pytest.mark.parametrize("kwargs", [{"prompt": 0}, {"batch": 0}, {"context": -1}])
def test_table_refuses_nonsense(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        roofline_table(H100, LLAMA_8B, **kwargs)


def test_listing_names_every_profile() -> None:
    text = profiles_listing()
    for profile_id in ("h100", "h200", "a100", "b200", "gb300", "rtx4090", "rtx-pro-6000"):
        assert f"\n  {profile_id} " in text
    for profile_id in ("mi300x", "llama-3.1-8b", "llama-3.1-70b", "deepseek-v3"):
        assert f"\n  {profile_id} " in text
    assert f"{2 * 32 * 8 * 128 * 2:,}" in text  # Llama 3.1 8B's KV bytes per token


# --- a point above its roof -------------------------------------------------------------------

RTX4090 = Hardware("rtx4090", "RTX 4090", 165.2e12, 1.008e12, 24e9)


def prefill_load(share_of_peak: float) -> LaneLoad:
    """A lane whose 2,048-token chunks (far above the ridge: the roof is the peak) run at this
    share of the H100's peak; mean position 2,500 as in LOAD."""
    per_token = 2 * P + 4 * LAYERS * HIDDEN * 2500
    return replace(LOAD, effective_prefill_rate=share_of_peak * PEAK / per_token)


def test_a_point_twice_its_roof_is_above_it() -> None:
    points = operating_points(prefill_load(2.0), H100, LLAMA_8B, chunk_tokens=2048)
    assert points.prefill is not None
    assert points.prefill.pct_of_roof == pytest.approx(200)
    assert points.prefill.above_roof and points.above_roof


def test_points_on_or_under_the_roof_are_not_above_it() -> None:
    for share in (0.25, 1.0, 1.004):
        points = operating_points(prefill_load(share), H100, LLAMA_8B, chunk_tokens=2048)
        assert points.prefill is not None and not points.prefill.above_roof, share
    assert operating_points(prefill_load(1.01), H100, LLAMA_8B, chunk_tokens=2048).above_roof


def test_the_lane_on_a_slower_profile_is_above_that_roof() -> None:
    """60 % of an H100's peak is 989 / 165.2 × 60 = 359 % of an RTX 4090's."""
    points = operating_points(prefill_load(0.6), RTX4090, LLAMA_8B, chunk_tokens=2048)
    assert points.prefill is not None
    assert points.prefill.pct_of_roof == pytest.approx(60 * PEAK / 165.2e12)
    assert points.prefill.above_roof and points.above_roof


def test_a_decode_step_faster_than_the_roof_and_measured_counters_over_it_are_above() -> None:
    context = 3000 + 400 / 2
    roof_step = max(
        8 * 1.5 * (2 * P + 4 * LAYERS * HIDDEN * context) / PEAK,
        (WEIGHTS + 8 * context * K) / BW,
    )
    points = operating_points(replace(LOAD, itl_s=roof_step / 2), H100, LLAMA_8B)
    assert points.decode is not None and points.decode.pct_of_roof == pytest.approx(200)
    assert points.decode.above_roof
    # Measured at intensity 100 (memory bound): twice 100 · BW is above the roof.
    over = replace(LOAD, measured_flops_per_s=2 * 100 * BW, measured_bytes_per_s=2 * BW)
    measured = operating_points(over, H100, LLAMA_8B).measured
    assert measured is not None and measured.above_roof
    assert operating_points(LOAD, H100, LLAMA_8B).measured is not None
    assert not operating_points(LOAD, H100, LLAMA_8B).above_roof


# --- resident memory, MoE reads, the model's number format, tensor parallel -------------------
# DeepSeek-V3 on an H200 from the packaged profiles, against numbers written out here: 671 B
# params at 1 byte (FP8), 37 B active, 8 of 256 routed experts per token, MLA KV of 70,272
# bytes per token; the H200 has 141 GB, 4.8 TB/s, 989 TFLOP/s dense BF16, 1,979 dense FP8.

DS_P, DS_ACTIVE, DS_E, DS_K, DS_KV = 671e9, 37e9, 256, 8, 70_272
DS_EXPERT = (DS_P - DS_ACTIVE) / (DS_E - DS_K)  # one routed expert over all MoE layers
DS_SHARED = DS_ACTIVE - DS_K * DS_EXPERT
H200_FP8, H200_BW = 1979e12, 4.8e12


def deepseek_reads(tokens: float) -> float:
    """Bytes of weights `tokens` tokens read: shared + expected distinct experts touched."""
    return DS_SHARED + DS_EXPERT * DS_E * (1 - (1 - DS_K / DS_E) ** tokens)


def test_deepseek_v3_is_resident_in_full_and_does_not_fit_one_h200() -> None:
    text = roofline_table(find_hardware("h200"), find_model("deepseek-v3"), prompt=2000, batch=2)
    resident = DS_P + 2 * 2000 * DS_KV
    assert f"{resident / 1e9:,.0f} GB resident (all weights 671 GB" in text
    assert "does NOT fit in 141 GB" in text
    assert " fits" not in text


def test_deepseek_v3_on_8_h200s_is_84_gb_per_gpu_and_fits() -> None:
    eight = find_hardware("h200").scaled(8)
    text = roofline_table(eight, find_model("deepseek-v3"), prompt=2000, batch=2)
    per_gpu = (DS_P + 2 * 2000 * DS_KV) / 8
    assert per_gpu == pytest.approx(84e9, abs=0.2e9)
    assert f"{per_gpu / 1e9:.1f} GB, fits in 141 GB" in text
    assert "does NOT fit" not in text
    assert "8 × 1.98 PFLOP/s" in text and "8 × 4.80 TB/s" in text
    one = decode_step(find_hardware("h200"), find_model("deepseek-v3"), 2, 2000)
    assert decode_step(eight, find_model("deepseek-v3"), 2, 2000).seconds == pytest.approx(
        one.seconds / 8
    )


def test_moe_decode_reads_the_active_params_at_batch_1_and_all_experts_at_256() -> None:
    model, h200 = find_model("deepseek-v3"), find_hardware("h200")
    assert decode_step(h200, model, 1, 0).weight_bytes == pytest.approx(DS_ACTIVE)
    assert decode_step(h200, model, 2, 0).weight_bytes == pytest.approx(deepseek_reads(2))
    assert 56e9 < deepseek_reads(2) < 2 * DS_ACTIVE  # two tokens share the shared part
    assert decode_step(h200, model, 256, 0).weight_bytes == pytest.approx(DS_P, rel=1e-3)
    assert decode_step(h200, model, 4096, 0).weight_bytes <= DS_P
    assert model.experts_touched(1) == pytest.approx(8)
    assert model.experts_touched(256) == pytest.approx(256 * (1 - (1 - 8 / 256) ** 256))


@given(batch=st.integers(1, 2048))
def test_moe_reads_grow_with_the_batch_and_never_pass_all_weights(batch: int) -> None:
    model = find_model("deepseek-v3")
    read = model.weight_bytes_read(batch)
    assert DS_ACTIVE * (1 - 1e-9) <= read <= DS_P * (1 + 1e-9)
    assert read <= batch * DS_ACTIVE * (1 + 1e-9)  # never more than the no-overlap bound
    assert model.weight_bytes_read(batch + 1) >= read


def test_an_fp8_model_is_held_to_the_fp8_peak() -> None:
    model, h200 = find_model("deepseek-v3"), find_hardware("h200")
    prefill = prefill_pass(h200, model, 2000)
    assert prefill.hw.peak_flops == H200_FP8
    assert prefill.seconds == pytest.approx(max(prefill.flops / H200_FP8, DS_P / H200_BW))
    text = roofline_table(h200, model)
    assert "1.98 PFLOP/s dense FP8" in text
    assert f"{H200_FP8 / H200_BW:,.0f} FLOP/byte" in text
    load = LaneLoad(mean_prompt=2000.0, mean_generated=100.0, running=4.0, itl_s=0.02)
    points = operating_points(load, h200, model)
    assert points.decode is not None and points.decode.hw.peak_flops == H200_FP8
    assert RooflineView(h200, model, points).hw.peak_flops == H200_FP8
    # A BF16 model on the same GPU keeps the BF16 peak.
    assert RooflineView(h200, find_model("llama-3.1-8b")).hw.peak_flops == 989e12


def test_without_an_fp8_peak_an_fp8_model_computes_in_bf16_and_says_so() -> None:
    a100 = find_hardware("a100")
    assert prefill_pass(a100, find_model("deepseek-v3"), 2000).hw.peak_flops == 312e12
    assert "312 TFLOP/s dense BF16 (no FP8 peak listed" in roofline_table(
        a100, find_model("deepseek-v3")
    )


def test_scaled_hardware_scales_every_peak() -> None:
    h100 = Hardware("h100", "H100", PEAK, BW, 80e9, other_peaks=(("fp8", 2 * PEAK),))
    eight = h100.scaled(8)
    assert eight.devices == 8 and eight.memory_per_device == 80e9
    assert eight.for_dtype("fp8").peak_flops == 16 * PEAK
    assert eight.for_dtype("fp8").for_dtype("bf16").peak_flops == 8 * PEAK


def test_the_table_marks_the_moe_estimate() -> None:
    text = roofline_table(find_hardware("h200"), find_model("deepseek-v3"), batch=2)
    assert f"experts read        {256 * (1 - (1 - 8 / 256) ** 2):.1f} of 256" in text
    assert "(estimate*)" in text and "upper bound if routing is skewed" in text
    assert "estimate" not in roofline_table(H100, LLAMA_8B)


def test_the_roofline_command_takes_gpus(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["roofline", "--hardware", "h200", "--model", "deepseek-v3", "--batch", "2"]
    assert main([*argv, "--gpus", "8"]) == 0
    assert "on 8× NVIDIA H200" in capsys.readouterr().out
    assert main(argv) == 0
    assert "does NOT fit in 141 GB" in capsys.readouterr().out


def test_rates_carry_every_prefix_on_the_number() -> None:
    assert rate_text(209.0) == "209 tok/s"
    assert rate_text(11_800.0) == "11.8k tok/s"
    assert rate_text(1.5e6) == "1.50M tok/s"
    assert rate_text(2.5e9) == "2.50G tok/s"  # was `2.50 Gtok/s`
