"""The packaged profiles: the seed's ridges, the models' own configs, sources, lookups."""

from __future__ import annotations

import math
import re
from importlib.resources import files
from typing import Any

import pytest
import yaml

from cockpit.roofline.profiles import (
    ProfileFieldError,
    find_hardware,
    find_model,
    hardware_from_mapping,
    hardware_profiles,
    model_from_mapping,
    model_profiles,
)

HARDWARE_IDS = ["h100", "h200", "a100", "b200", "gb300", "rtx4090", "rtx-pro-6000", "mi300x"]
MODEL_IDS = ["llama-3.1-8b", "llama-3.1-70b", "deepseek-v3", "qwen3-32b"]


def test_every_required_profile_is_packaged() -> None:
    assert set(HARDWARE_IDS) <= set(hardware_profiles())
    assert set(MODEL_IDS) <= set(model_profiles())


@pytest.mark.parametrize(("hw_id", "seed_ridge"), [("h100", 295), ("a100", 153), ("rtx4090", 164)])
def test_the_seeds_ridges(hw_id: str, seed_ridge: int) -> None:
    assert round(find_hardware(hw_id).ridge) == seed_ridge


def test_h100_is_the_seeds_h100() -> None:
    h100 = find_hardware("h100")
    assert h100.peak_flops == 989e12
    assert h100.bandwidth == 3.35e12


def test_llama_8b_is_the_seeds_model() -> None:
    model = find_model("llama-3.1-8b")
    assert (model.params, model.layers, model.hidden) == (8.03e9, 32, 4096)
    assert model.bytes_per_param == 2
    assert model.kv_bytes_per_token == 128 * 1024 == 2 * 32 * 8 * 128 * 2  # K,V·L·kv heads·dim·2B


def test_llama_70b_kv_from_its_config() -> None:
    model = find_model("llama-3.1-70b")
    assert (model.layers, model.hidden) == (80, 8192)
    assert model.kv_bytes_per_token == 2 * 80 * 8 * 128 * 2 == 327_680


def test_deepseek_v3_is_moe_with_mla_kv() -> None:
    model = find_model("deepseek-v3")
    assert (model.params, model.active_params) == (671e9, 37e9)
    assert model.is_moe
    assert (model.layers, model.hidden) == (61, 7168)
    assert model.kv_bytes_per_token == (512 + 64) * 61 * 2


def test_deepseek_v3_routes_8_of_256_experts_in_fp8() -> None:
    model = find_model("deepseek-v3")
    assert (model.experts, model.experts_per_token, model.compute_dtype) == (256, 8, "fp8")
    # config.json: 3 · hidden 7168 · moe_intermediate 2048 per expert, in 58 MoE layers
    assert model.expert_params == pytest.approx(3 * 7168 * 2048 * 58, rel=0.01)
    assert model.shared_params == pytest.approx(37e9 - 8 * (671e9 - 37e9) / 248)


@pytest.mark.parametrize(
    ("hw_id", "fp8"),
    [("h100", 1979e12), ("h200", 1979e12), ("b200", 4.5e15), ("gb300", 5e15),
     ("rtx4090", 330.3e12), ("rtx-pro-6000", 1007.6e12), ("mi300x", 2614.9e12)],
)  # fmt: skip
def test_fp8_peaks_are_the_datasheets_dense_figures(hw_id: str, fp8: float) -> None:
    hw = find_hardware(hw_id)
    assert hw.peak_for("fp8") == fp8
    assert hw.peak_for("fp8") == pytest.approx(2 * hw.peak_flops, rel=0.01)


def test_the_a100_has_no_fp8_peak() -> None:
    assert find_hardware("a100").peak_for("fp8") is None
    assert find_hardware("a100").for_dtype("fp8") == find_hardware("a100")


def test_qwen3_32b_attention_is_wider_than_its_hidden_size() -> None:
    model = find_model("qwen3-32b")
    assert model.attention_dim == 64 * 128
    assert model.kv_bytes_per_token == 2 * 64 * 8 * 128 * 2


def test_profiles_are_physically_plausible() -> None:
    for hw in hardware_profiles().values():
        assert 50e12 < hw.peak_flops < 10e15, hw.id
        assert 0.5e12 < hw.bandwidth < 20e12, hw.id
        assert 100 < hw.ridge < 400, hw.id
        assert 16e9 <= hw.memory_bytes <= 300e9, hw.id
    for model in model_profiles().values():
        assert model.active_params <= model.params
        assert model.kv_bytes_per_token < 1e6


def _yaml_blocks(section: str) -> dict[str, str]:
    """Each profile's raw YAML text, comments included."""
    text = files("cockpit.roofline").joinpath("profiles.yaml").read_text(encoding="utf-8")
    body = text.split(f"\n{section}:\n", 1)[1]
    body = re.split(r"\n\S", body, maxsplit=1)[0]
    parts = re.split(r"\n  (?=[a-z0-9][^\n]*:\n)", "\n" + body)
    return {part.split(":", 1)[0].strip(): part for part in parts if part.strip()}


@pytest.mark.parametrize("section", ["hardware", "models"])
def test_every_profile_cites_a_public_source(section: str) -> None:
    blocks = _yaml_blocks(section)
    assert len(blocks) == len(hardware_profiles() if section == "hardware" else model_profiles())
    for profile_id, block in blocks.items():
        assert re.search(r"#.*https://", block), f"{profile_id} has no source URL"


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        ("H100", "h100"),
        ("  h100-sxm ", "h100"),
        ("RTX 4090", "rtx4090"),
        ("rtx_pro_6000", "rtx-pro-6000"),
        ("MI300X", "mi300x"),
    ],
)
def test_hardware_lookup_ignores_case_and_accepts_aliases(asked: str, expected: str) -> None:
    assert find_hardware(asked).id == expected
    assert asked in hardware_profiles()


@pytest.mark.parametrize(
    ("asked", "expected"),
    [
        ("Llama-3.1-8B", "llama-3.1-8b"),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b"),
        ("DeepSeek-AI/DeepSeek-V3", "deepseek-v3"),
    ],
)
def test_model_lookup_ignores_case_and_accepts_aliases(asked: str, expected: str) -> None:
    assert find_model(asked).id == expected


def test_unknown_ids_name_the_known_ones() -> None:
    with pytest.raises(KeyError) as hardware_error:
        find_hardware("tpu-v5")
    message = hardware_error.value.args[0]
    assert "tpu-v5" in message
    assert all(hw_id in message for hw_id in HARDWARE_IDS)
    with pytest.raises(KeyError) as model_error:
        find_model("gpt-5")
    assert all(model_id in model_error.value.args[0] for model_id in MODEL_IDS)
    assert "gpt-5" not in model_profiles()


def test_iteration_gives_canonical_ids_only() -> None:
    assert list(hardware_profiles()) == HARDWARE_IDS
    assert len(hardware_profiles()) == len(HARDWARE_IDS)


# --- custom profiles from config mappings -------------------------------------------------

GOOD_HW: dict[str, Any] = {
    "name": "Lab card",
    "peak_flops": 100e12,
    "bandwidth": 1e12,
    "memory_bytes": 48e9,
}
GOOD_MODEL: dict[str, Any] = {
    "params": 7e9,
    "bytes_per_param": 2,
    "layers": 28,
    "hidden": 3584,
    "kv_bytes_per_token": 57344,
}


def test_custom_hardware_from_a_mapping() -> None:
    hw = hardware_from_mapping("Lab-Card", GOOD_HW)
    assert (hw.id, hw.name, hw.ridge) == ("lab-card", "Lab card", 100.0)


def test_custom_numbers_written_as_yaml_reads_them() -> None:
    # PyYAML reads `989e12` (no dot, no exponent sign) as a string; accept it as a number.
    mapping = yaml.safe_load("peak_flops: 989e12\nbandwidth: 3.35e12\nmemory_bytes: 80e9\n")
    assert isinstance(mapping["peak_flops"], str)
    assert hardware_from_mapping("x", mapping).peak_flops == 989e12


def test_custom_model_defaults_active_to_total_and_name_to_id() -> None:
    model = model_from_mapping("my-7b", GOOD_MODEL)
    assert model.active_params == 7e9 and model.name == "my-7b"
    assert model.attention_width is None
    assert model.compute_dtype == "bf16" and not model.has_expert_counts


GOOD_MOE: dict[str, Any] = {
    **GOOD_MODEL, "params": 30e9, "active_params": 3e9, "experts": 128, "experts_per_token": 8,
    "compute_dtype": "FP8",
}  # fmt: skip


def test_custom_moe_and_fp8_fields() -> None:
    model = model_from_mapping("my-moe", GOOD_MOE)
    assert (model.experts, model.experts_per_token, model.compute_dtype) == (128, 8, "fp8")
    assert model.weight_bytes_read(1) == pytest.approx(2 * 3e9)
    hw = hardware_from_mapping("card", {**GOOD_HW, "peak_flops_fp8": 200e12})
    assert hw.peak_for("fp8") == 200e12 and hw.peak_for("bf16") == 100e12


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"experts_per_token": None}, "experts_per_token"),
        ({"experts": None}, "experts"),
        ({"experts_per_token": 128}, "experts_per_token"),
        ({"active_params": 30e9}, "experts"),
        ({"active_params": 1e9}, "experts_per_token"),  # 8 routed experts alone would hold 1.9 B
        ({"compute_dtype": "fp6"}, "compute_dtype"),
        ({"experts": 2.5}, "experts"),
    ],
)
def test_bad_moe_fields_are_named(change: dict[str, Any], field: str) -> None:
    mapping = {k: v for k, v in {**GOOD_MOE, **change}.items() if v is not None}
    with pytest.raises(ProfileFieldError) as error:
        model_from_mapping("x", mapping)
    assert error.value.field == field


def test_a_bad_fp8_peak_is_named() -> None:
    with pytest.raises(ProfileFieldError) as error:
        hardware_from_mapping("x", {**GOOD_HW, "peak_flops_fp8": -1})
    assert error.value.field == "peak_flops_fp8"


@pytest.mark.parametrize("bad", [0, -1, "fast", True, math.nan, math.inf, [1], None])
@pytest.mark.parametrize("field", ["peak_flops", "bandwidth", "memory_bytes"])
def test_bad_hardware_numbers_name_the_field(field: str, bad: object) -> None:
    with pytest.raises(ValueError, match=rf"^field {field}: .*expected a positive number"):
        hardware_from_mapping("x", {**GOOD_HW, field: bad})


def test_a_missing_field_is_named() -> None:
    mapping = {k: v for k, v in GOOD_HW.items() if k != "bandwidth"}
    with pytest.raises(ProfileFieldError) as error:
        hardware_from_mapping("x", mapping)
    assert error.value.field == "bandwidth"
    assert "missing" in str(error.value)


def test_an_unknown_field_is_named() -> None:
    with pytest.raises(ValueError, match=r"^field peak_tflops: unknown field"):
        hardware_from_mapping("x", {**GOOD_HW, "peak_tflops": 100})


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"layers": 28.5}, "layers"),
        ({"hidden": "wide"}, "hidden"),
        ({"active_params": 8e9}, "active_params"),
        ({"kv_bytes_per_token": -5}, "kv_bytes_per_token"),
        ({"attention_width": 0}, "attention_width"),
        ({"name": ""}, "name"),
    ],
)
def test_bad_model_fields_are_named(change: dict[str, Any], field: str) -> None:
    with pytest.raises(ProfileFieldError) as error:
        model_from_mapping("x", {**GOOD_MODEL, **change})
    assert error.value.field == field
    assert str(error.value).startswith(f"field {field}: ")
