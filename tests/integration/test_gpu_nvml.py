"""NVML on a machine without an NVIDIA driver (this one, CI's): the words say so, nothing
crashes, the lane reads on. The real nvidia-ml-py is imported; on a machine with a driver
`e2e/gpu_check.py` checks what NVML reads instead."""

from __future__ import annotations

import asyncio
import ctypes.util
import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator

import pytest

from cockpit.core.gpu import Gpu, GpuTotals
from cockpit.core.gpu_figures import gpu_figures
from cockpit.demo import SimulatedLane
from cockpit.sources.gpu_nvml import NO_DRIVER, NO_PACKAGE, NvmlGpu
from cockpit.widgets.vitals import gpu_line, gpu_view
from tests.support.repo import REPO

pytestmark = pytest.mark.skipif(
    ctypes.util.find_library("nvidia-ml") is not None,
    reason="this machine has libnvidia-ml: run e2e/gpu_check.py",
)
WORDS = "no NVIDIA driver (libnvidia-ml) on this machine"


def read_twice(source: NvmlGpu) -> list[GpuTotals]:
    async def reads() -> list[GpuTotals]:
        try:
            return [await source.read(3600.0, None, {}) for _ in range(2)]
        finally:
            await source.close()

    return asyncio.run(reads())


def test_without_a_driver_nvml_says_so_in_words() -> None:
    pytest.importorskip("pynvml")
    for totals in read_twice(NvmlGpu()):
        assert NO_DRIVER == WORDS
        figures = gpu_figures(totals, 10.0, 10.0)
        assert figures is not None and figures.source == "NVML" and figures.reason == WORDS
        assert figures.figures["gpu_util"].missing
        assert figures.figures["gpu_power_w"].reason == WORDS


def test_without_a_driver_the_gpu_line_says_so_in_words() -> None:
    pytest.importorskip("pynvml")
    totals = read_twice(NvmlGpu())[-1]
    (text,) = gpu_line(gpu_view(gpu_figures(totals, None, None), {}), 120)
    assert text.plain == f"GPU NVML: {WORDS}"


def test_without_the_package_it_says_how_to_install_it() -> None:
    (totals, _) = read_twice(NvmlGpu(module="cockpit_no_such_nvml_module"))
    assert totals.reason == NO_PACKAGE
    assert "pip install 'lane-cockpit[nvml]'" in NO_PACKAGE


@pytest.fixture
def engine() -> Iterator[str]:
    lane = SimulatedLane("h100-llama8b", seed=3, warm_start=60.0)
    yield lane.start()
    lane.stop()


def test_a_lane_with_nvml_reads_and_its_receipt_says_why_no_gpu(engine: str) -> None:
    pytest.importorskip("pynvml")
    command = [
        sys.executable,
        "-m",
        "cockpit",
        "report",
        "--metrics-url",
        engine,
        "--nvml",
        "--sample",
        "1s",
    ]
    done = subprocess.run(
        [*command, "--format", "json"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    receipt = json.loads(done.stdout)
    assert receipt["lane"]["figures"]["requests"]["value"] is not None
    assert receipt["gpu"]["reason"] == WORDS
    assert receipt["gpu"]["figures"]["gpu_util"]["reason"] == WORDS
    markdown = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert markdown.returncode == 0 and f"> {WORDS}" in markdown.stdout
    assert "Traceback" not in markdown.stderr + done.stderr


def test_the_gpu_check_says_how_to_run_it_and_fails_without_a_gpu() -> None:
    pytest.importorskip("pynvml")
    script = REPO / "e2e" / "gpu_check.py"
    assert "python e2e/gpu_check.py" in script.read_text()
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and WORDS in done.stderr


def test_the_gpu_check_names_each_disagreement_beyond_its_tolerance() -> None:
    spec = importlib.util.spec_from_file_location("gpu_check", REPO / "e2e" / "gpu_check.py")
    assert spec is not None and spec.loader is not None
    check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(check)
    gpu = Gpu("0", "u", util=0.5, memory_used_bytes=1000 * 2**20, memory_total_bytes=81559 * 2**20,
              power_w=400.0, temp_c=60.0)  # fmt: skip
    assert check.disagreements([gpu], [[55.0, 1010.0, 81559.0, 420.0, 61.0]]) == []
    found = check.disagreements([gpu], [[75.0, 1010.0, 81559.0, 500.0, 61.0]])
    assert found == [
        "GPU 0 util %: cockpit 50.0, nvidia-smi 75 (allowed ±10)",
        "GPU 0 power W: cockpit 400.0, nvidia-smi 500 (allowed ±50)",
    ]
    assert check.disagreements([gpu], []) == ["the cockpit reads 1 GPUs, nvidia-smi 0"]
