"""A simulated dcgm-exporter for a demo lane's GPUs: its series (`DCGM_FI_*` with the
profiling fields), units and label set, on loopback, its load following a slow wave and its
energy counter the integral of its power."""

from __future__ import annotations

import math
import threading
import time
import zlib
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from cockpit.demo.lane import LOOPBACK, MetricsServer, serve_metrics
from cockpit.demo.lane_presets import LanePreset

MIB = 2**20
GPUS = {  # hardware profile -> (modelName, framebuffer MiB, power limit W)
    "h100": ("NVIDIA H100 80GB HBM3", 81559, 700.0),
    "gb300": ("NVIDIA GB300", 284208, 1400.0),
}
IDLE_W = 90.0


class _DcgmCollector(Collector):
    def __init__(self, exporter: SimulatedDcgm) -> None:
        self._exporter = exporter

    def collect(self) -> Iterator[Metric]:
        return iter(self._exporter.families())


class SimulatedDcgm:
    """dcgm-exporter for `preset`'s GPUs; `start()` serves `/metrics`, `families()` renders."""

    def __init__(self, preset: LanePreset, clock: Callable[[], float] = time.monotonic) -> None:
        self.preset = preset
        self.model, self.fb_mib, self.limit_w = GPUS.get(preset.hardware, GPUS["h100"])
        self._clock = clock
        self._last = clock()
        self._energy_mj = [3.6e9 * (i + 1) for i in range(preset.gpus)]
        self._lock = threading.Lock()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_DcgmCollector(self))
        self._server: MetricsServer | None = None
        self._thread: threading.Thread | None = None

    def _load(self, gpu: int, now: float) -> float:
        return 0.6 + 0.3 * math.sin(now / 41.0 + gpu * 0.7)

    def families(self) -> list[Metric]:
        with self._lock:
            now = self._clock()
            dt, self._last = now - self._last, now
            loads = [self._load(i, now) for i in range(self.preset.gpus)]
            power = [IDLE_W + (self.limit_w - IDLE_W) * 0.85 * load for load in loads]
            self._energy_mj = [
                e + p * dt * 1000 for e, p in zip(self._energy_mj, power, strict=True)
            ]
            energy = list(self._energy_mj)
        n = len(loads)
        used = [0.92 * self.fb_mib] * n
        fields: list[tuple[str, str, str, list[float]]] = [
            ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", [1980.0] * n),
            ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).",
             [38 + 35 * x for x in loads]),
            ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", power),
            ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
             "Total energy consumption since boot (in mJ).", energy),
            ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).",
             [round(min(100.0, 100 * (0.3 + 0.7 * x))) for x in loads]),
            ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.",
             [0.0] * n),
            ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
             [self.fb_mib - u - 553 for u in used]),
            ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", used),
            ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).",
             [553.0] * n),
            ("DCGM_FI_PROF_SM_ACTIVE", "gauge",
             "The ratio of cycles an SM has at least 1 warp assigned.",
             [0.5 + 0.45 * x for x in loads]),
            ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
             "Ratio of cycles the tensor (HMMA) pipe is active.", [0.08 + 0.4 * x for x in loads]),
            ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
             "Ratio of cycles the device memory interface is active sending or receiving data.",
             [0.3 + 0.5 * x for x in loads]),
        ]  # fmt: skip
        families = []
        for name, kind, doc, values in fields:
            family = Metric(name, doc, kind)
            for gpu, value in enumerate(values):
                family.add_sample(name, self._labels(gpu), float(round(value, 6)))
            families.append(family)
        return families

    def _labels(self, gpu: int) -> dict[str, str]:
        return {
            "gpu": str(gpu),
            "UUID": f"GPU-{zlib.crc32(f'{self.preset.name}/{gpu}'.encode()):08x}-demo",
            "pci_bus_id": f"00000000:{0x18 + gpu:02X}:00.0",
            "device": f"nvidia{gpu}",
            "modelName": self.model,
            "Hostname": f"{self.preset.name}-node",
        }

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the simulated dcgm-exporter is not serving")
        return int(self._server.server_address[1])

    def start(self) -> str:
        """Serve `/metrics` on 127.0.0.1 (any free port); return its URL."""
        self._server, self._thread = serve_metrics(self.registry)
        return f"http://{LOOPBACK}:{self.port}/metrics"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)
            self._server = self._thread = None
