"""The GPU figures' arithmetic over GPUs, the GPU health rules, and the GPUs in the receipts
(markdown and JSON: SI units, shares 0-1), from dcgm-exporter's fixture read by direct
scrape."""

from __future__ import annotations

from dataclasses import replace

import pytest

from cockpit.core.figures import lane_figures
from cockpit.core.gpu import Gpu, GpuTotals
from cockpit.core.gpu_figures import SPECS, gpu_figures
from cockpit.core.health import Thresholds, check
from cockpit.core.model import LaneTotals
from cockpit.core.snapshot import LaneSnapshot
from cockpit.runtime.report import json_receipt, markdown_receipt
from cockpit.sources.gpu import ScrapeGpu
from tests.support.repo import FIXTURES

GIB = 2**30


def dcgm_totals() -> GpuTotals:
    text = (FIXTURES / "gpu" / "dcgm.txt").read_text()
    source = ScrapeGpu("http://127.0.0.1:9400/metrics")
    source.ingest(text, 100.0)
    source.ingest(text.replace("123456789012", "123457789012"), 115.0)  # GPU 0: +1 kJ
    return source.totals(3600.0, None)


def lane(gpu: GpuTotals | None) -> LaneSnapshot:
    values = {"generation_tokens": 500.0, "prompt_tokens": 200_000.0, "requests": 4.0}
    totals = LaneTotals("lane-a", "vllm", 3600.0, 115.0, values=values, gpu=gpu)
    return LaneSnapshot("lane-a", "1h", totals, lane_figures(totals), None, None)


def test_every_spec_has_a_figure_and_the_energy_per_token_uses_the_lanes_tokens() -> None:
    figures = lane(dcgm_totals()).gpu_figures()
    assert figures is not None and set(figures.figures) == {spec.key for spec in SPECS}
    assert figures.value("gpu_energy_j") == pytest.approx(1000.0)
    assert figures.value("joules_per_generated_token") == pytest.approx(2.0)
    assert figures.value("joules_per_1k_prompt_tokens") == pytest.approx(5.0)
    assert "since start (15 s)" in figures.figures["gpu_energy_j"].reason
    assert figures.figures["gpu_power_w"].reason == ""  # a reading of now: the window is moot


def test_a_figure_some_gpus_lack_is_over_those_that_have_it_and_says_so() -> None:
    gpus = (Gpu("0", "a", util=0.5, power_w=300.0), Gpu("1", "b", power_w=200.0))
    figures = gpu_figures(GpuTotals("NVML", "this machine", gpus), None, None)
    assert figures is not None
    assert figures.value("gpu_util") == 0.5 and figures.figures["gpu_util"].reason == "1 of 2 GPUs"
    assert figures.value("gpu_power_w") == 500.0
    assert figures.figures["joules_per_generated_token"].missing


def test_the_gpu_health_rules() -> None:
    quiet = lane(dcgm_totals())
    assert [f.rule for f in check(quiet, Thresholds())] == []
    totals = dcgm_totals()
    hot, full = totals.gpus
    gpus = (
        replace(hot, xid=79.0, throttle_thermal=1.0),
        replace(full, memory_used_bytes=79.5 * GIB, memory_total_bytes=80 * GIB),
    )
    findings = {f.rule: f for f in check(lane(replace(totals, gpus=gpus)), Thresholds())}
    assert findings["gpu_xid"].text == "GPU 0 (XID 79): XID error in the window"
    assert findings["gpu_xid"].severity == "bad"
    assert findings["gpu_memory_full"].text == ("GPU 1 (99%): memory at its limit (alert at ≥ 98%)")
    assert findings["gpu_throttled"].text == "GPU 0 (heat): clocks held down in the window"
    relaxed = check(lane(replace(totals, gpus=gpus)), Thresholds(gpu_memory=0.995))
    assert "gpu_memory_full" not in {f.rule for f in relaxed}


def test_the_receipts_carry_the_gpus() -> None:
    snapshot = lane(dcgm_totals())
    receipt = json_receipt(snapshot, None)
    gpu = receipt["gpu"]
    assert gpu["source"] == "dcgm-exporter" and gpu["window"] == "1h"
    assert gpu["figures"]["gpu_power_w"] == {
        "label": "GPU power now",
        "value": 1067.75,
        "unit": "watts",
        "text": "1.068 kW",
    }
    assert gpu["figures"]["gpu_util"]["value"] == pytest.approx(0.745)  # a share, 0-1
    assert gpu["figures"]["gpu_memory_used_bytes"]["value"] == (61440 + 40960) * 2**20
    assert [g["uuid"] for g in gpu["gpus"]] == [g.uuid for g in dcgm_totals().gpus]
    assert gpu["gpus"][1]["figures"]["tensor_active"]["value"] == pytest.approx(0.182345)
    text = markdown_receipt(snapshot, None)
    assert "## The GPUs of lane-a: dcgm-exporter, http://127.0.0.1:9400/metrics" in text
    assert "| GPU energy per generated token | 2 J (since start (15 s)) |" in text
    assert "| 1 NVIDIA H100 80GB HBM3 | 62.0% |" in text


def test_a_lane_without_a_gpu_source_has_no_gpu_section() -> None:
    snapshot = lane(None)
    assert "gpu" not in json_receipt(snapshot, None)
    assert "GPUs of" not in markdown_receipt(snapshot, None)
    assert check(snapshot, Thresholds()) == ()
