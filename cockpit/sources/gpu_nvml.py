"""This machine's GPUs through NVML (`nvidia-ml-py`, the `nvml` extra, imported at the first
read). Each refresh reads every device once, off the event loop, into a `ReadBuffer`, so the
window's figures are reduced as for a scraped exporter."""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Callable
from dataclasses import replace
from types import ModuleType

from cockpit.core.gpu import GpuTotals
from cockpit.core.gpu_series import Exporter, Series
from cockpit.sources.gpu import OwnReads, Reading

NO_DRIVER = "no NVIDIA driver (libnvidia-ml) on this machine"
NO_PACKAGE = "reading GPUs through NVML needs nvidia-ml-py: pip install 'lane-cockpit[nvml]'"
WHERE = "this machine"
POWER_REASONS = 0x4 | 0x80
"""NVML clock event reasons: the software power cap, the hardware power brake."""
THERMAL_REASONS = 0x20 | 0x40
"""The software and hardware thermal slowdowns."""
Processes = tuple[tuple[int, float], ...]
"""(pid, bytes of GPU memory) of each process holding memory on a GPU."""

NVML = Exporter(
    "NVML",
    "nvml",
    ("uuid", "index", "name"),
    (
        Series("util", ("nvml_utilization_gpu",), "mean", 0.01),
        Series("memory_used_bytes", ("nvml_memory_used",), "now"),
        Series("memory_total_bytes", ("nvml_memory_total",), "now"),
        Series("power_w", ("nvml_power_usage",), "now", 0.001),
        Series("temp_c", ("nvml_temperature_gpu",), "now"),
        Series("energy_j", ("nvml_total_energy_consumption",), "increase", 0.001),
        Series("throttle_power", ("nvml_throttle_power",), "peak", flag=True),
        Series("throttle_thermal", ("nvml_throttle_thermal",), "peak", flag=True),
        Series("sm_clock_hz", ("nvml_clock_sm",), "now", 1e6),
    ),
    {
        **dict.fromkeys(
            ("dram_active", "tensor_active", "sm_active"),
            "NVML gives no DRAM, tensor or SM activity (dcgm-exporter's profiling fields do)",
        ),
        "xid": "NVML's XID errors come as events, which the cockpit does not register for",
    },
)


def _text(value: str | bytes) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _reads(nvml: ModuleType, handle: object) -> dict[str, Callable[[], float]]:
    """How each reading of one device is taken (the raw units: %, bytes, mW, °C, mJ, MHz)."""
    reasons = nvml.nvmlDeviceGetCurrentClocksEventReasons
    return {
        "nvml_utilization_gpu": lambda: nvml.nvmlDeviceGetUtilizationRates(handle).gpu,
        "nvml_memory_used": lambda: nvml.nvmlDeviceGetMemoryInfo(handle).used,
        "nvml_memory_total": lambda: nvml.nvmlDeviceGetMemoryInfo(handle).total,
        "nvml_power_usage": lambda: nvml.nvmlDeviceGetPowerUsage(handle),
        "nvml_temperature_gpu": lambda: nvml.nvmlDeviceGetTemperature(
            handle, nvml.NVML_TEMPERATURE_GPU
        ),
        "nvml_total_energy_consumption": lambda: nvml.nvmlDeviceGetTotalEnergyConsumption(handle),
        "nvml_clock_sm": lambda: nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM),
        "nvml_throttle_power": lambda: reasons(handle) & POWER_REASONS,
        "nvml_throttle_thermal": lambda: reasons(handle) & THERMAL_REASONS,
    }


def read_devices(nvml: ModuleType) -> tuple[list[Reading], dict[str, Processes]]:
    """Every device's readings (one its GPU does not support is left out) and the processes
    holding its memory, by uuid."""
    readings: list[Reading] = []
    processes: dict[str, Processes] = {}
    for index in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        uuid = _text(nvml.nvmlDeviceGetUUID(handle))
        labels = {"uuid": uuid, "index": str(index), "name": _text(nvml.nvmlDeviceGetName(handle))}
        for name, read in _reads(nvml, handle).items():
            try:
                readings.append((name, labels, float(read())))
            except nvml.NVMLError:  # not supported by this GPU or driver
                continue
        try:
            running = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
        except nvml.NVMLError:
            running = []
        processes[uuid] = tuple((p.pid, float(p.usedGpuMemory or 0)) for p in running)
    return readings, processes


class NvmlGpu(OwnReads):
    """The GPUs of this machine; without the package or a driver, says which is missing."""

    def __init__(self, module: str = "pynvml") -> None:
        super().__init__((NVML,), WHERE)
        self._module = module
        self._nvml: ModuleType | None = None
        self._processes: dict[str, Processes] = {}
        self._cannot = ""
        """Why NVML can't be used at all (no package, no driver): not asked again."""

    async def poll(self) -> str:
        return self._cannot or await asyncio.to_thread(self._poll)

    def totals(self, window_s: float, end: float | None) -> GpuTotals:
        if self._cannot:
            return GpuTotals("NVML", WHERE, reason=self._cannot)
        totals = super().totals(window_s, end)
        gpus = tuple(replace(g, processes=self._processes.get(g.uuid, ())) for g in totals.gpus)
        return replace(totals, gpus=gpus)

    def _poll(self) -> str:
        """One read of every device into the buffer; why it failed, or ''."""
        if self._nvml is None:
            self._cannot = self._start()
            if self._cannot:
                return self._cannot
        nvml = self._nvml
        assert nvml is not None
        try:
            readings, self._processes = read_devices(nvml)
        except nvml.NVMLError as error:
            return f"NVML: {error}"
        self.buffer.add(time.time(), readings)
        return ""

    def _start(self) -> str:
        """Import the bindings and initialise NVML; why that failed, or ''."""
        try:
            nvml = importlib.import_module(self._module)
        except ImportError:
            return NO_PACKAGE
        try:
            nvml.nvmlInit()
        except (nvml.NVMLError_LibraryNotFound, nvml.NVMLError_DriverNotLoaded):
            return NO_DRIVER
        except nvml.NVMLError as error:
            return f"NVML: {error}"
        self._nvml = nvml
        return ""

    async def close(self) -> None:
        if self._nvml is not None:
            await asyncio.to_thread(self._nvml.nvmlShutdown)
            self._nvml = None
