"""A lane's GPUs as the GPU sources give them: frozen, one `Gpu` per device. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU's readings; None where its source has no such reading."""

    id: str
    """The index (`gpu` label, NVML index)."""
    uuid: str
    name: str = ""
    util: float | None = None
    """Share of the window a kernel ran (0-1, the window's mean)."""
    memory_used_bytes: float | None = None
    memory_total_bytes: float | None = None
    power_w: float | None = None
    temp_c: float | None = None
    energy_j: float | None = None
    """The energy counter's increase over the window (J)."""
    dram_active: float | None = None
    tensor_active: float | None = None
    sm_active: float | None = None
    xid: float | None = None
    """The largest XID error code reported in the window; 0: none."""
    throttle_power: float | None = None
    """1: clocks held down (by the power limit, by heat) in the window; 0: not."""
    throttle_thermal: float | None = None
    sm_clock_hz: float | None = None
    processes: tuple[tuple[int, float], ...] = ()
    """(pid, bytes of GPU memory) of the processes holding memory (NVML only)."""


READINGS: tuple[str, ...] = tuple(f.name for f in fields(Gpu))[3:-1]
"""The per-GPU readings, in `Gpu`'s order."""


@dataclass(frozen=True, slots=True)
class GpuTotals:
    """A lane's GPUs as one read found them; `reason` says why there are none."""

    source: str
    """`dcgm-exporter`, `nvidia_gpu_exporter`, `NVML`; empty when nothing was read."""
    where: str
    """The selector, the URL or `this machine`."""
    gpus: tuple[Gpu, ...] = ()
    reason: str = ""
    """Why there are no GPUs, or, beside them, why they are not of this refresh."""
    lacks: Mapping[str, str] = field(default_factory=dict)
    """Reading -> why this source has none (every GPU lacks it)."""
    coverage_note: str = ""
    queries: Mapping[str, str] = field(default_factory=dict)
