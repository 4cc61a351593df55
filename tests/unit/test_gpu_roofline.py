"""The measured point G: DRAM activity × peak bandwidth against tensor activity × peak FLOP/s,
checked by hand for the H100 profile (989 TFLOP/s dense BF16, 1,979 FP8, 3.35 TB/s)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cockpit.core.figures import lane_figures
from cockpit.core.gpu import Gpu, GpuTotals
from cockpit.core.model import LaneTotals
from cockpit.core.snapshot import LaneSnapshot
from cockpit.roofline.model import GPU_POINT_LEGEND, gpu_point
from cockpit.roofline.profiles import hardware_profiles, model_profiles
from cockpit.widgets.roofline import caption_lines

H100 = hardware_profiles()["h100"]
LLAMA = model_profiles()["llama-3.1-8b"]


def test_g_on_an_h100_is_the_activity_times_the_peaks() -> None:
    point, why = gpu_point(H100, LLAMA, dram_active=0.6, tensor_active=0.3)
    assert point is not None and why == ""
    assert point.achieved_bytes_per_s == pytest.approx(0.6 * 3.35e12)  # 2.01 TB/s
    assert point.achieved_flops_per_s == pytest.approx(0.3 * 989e12)  # 296.7 TFLOP/s
    assert point.intensity == pytest.approx(296.7e12 / 2.01e12)  # 147.6 FLOP/byte
    assert point.bound == "memory"  # under the ridge, 989 / 3.35 = 295.2
    # attainable at 147.6 FLOP/byte: 147.6 × 3.35 TB/s = 494.5 TFLOP/s; 296.7 of it is 60 %
    assert point.pct_of_roof == pytest.approx(100 * 296.7 / (147.6119 * 3.35))
    assert point.pct_of_roof == pytest.approx(60.0)  # the larger of the two activities


def test_g_uses_the_peak_of_the_models_number_format() -> None:
    fp8 = replace(LLAMA, compute_dtype="fp8")
    point, _ = gpu_point(H100, fp8, dram_active=0.2, tensor_active=0.5)
    assert point is not None
    assert point.achieved_flops_per_s == pytest.approx(0.5 * 1979e12)
    assert point.bound == "compute"  # 989.5e12 / 0.67e12 = 1477 > ridge 1979 / 3.35 = 591
    assert point.pct_of_roof == pytest.approx(50.0)


def test_without_activity_there_is_no_g_and_it_says_why() -> None:
    assert gpu_point(H100, LLAMA, None, 0.3) == (
        None,
        "no DRAM and tensor activity (dcgm-exporter's profiling fields give them)",
    )
    assert gpu_point(H100, LLAMA, 0.0, 0.3)[0] is None


def _lane(gpus: tuple[Gpu, ...]) -> LaneSnapshot:
    totals = LaneTotals("lane", "vllm", 3600.0, 1e9, gpu=GpuTotals("dcgm-exporter", "{}", gpus))
    hardware = H100.scaled(len(gpus))
    return LaneSnapshot("lane", "1h", totals, lane_figures(totals), hardware, LLAMA, gpus=len(gpus))


def test_the_lanes_g_is_the_gpus_mean_activity_under_all_its_gpus_roof() -> None:
    gpus = (
        Gpu("0", "GPU-a", dram_active=0.7, tensor_active=0.4),
        Gpu("1", "GPU-b", dram_active=0.5, tensor_active=0.2),
    )
    view = _lane(gpus).roofline()
    assert view is not None and view.points is not None and view.points.gpu is not None
    g = view.points.gpu
    assert g.achieved_bytes_per_s == pytest.approx(0.6 * 2 * 3.35e12)
    assert g.achieved_flops_per_s == pytest.approx(0.3 * 2 * 989e12)
    lines = caption_lines(view, legend=True)
    assert any(line.startswith("G ") and "60% of roof" in line for line in lines), lines
    assert lines[-1] == GPU_POINT_LEGEND
    assert "upper bound" in GPU_POINT_LEGEND and "not bytes" in GPU_POINT_LEGEND
