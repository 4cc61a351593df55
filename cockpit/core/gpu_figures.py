"""The GPU figures over a lane's GPUs, and each GPU's own, from `GpuTotals`: each declared once
in `SPECS`. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, NamedTuple

from cockpit.core.catalogue import TrendSeries
from cockpit.core.gpu import Gpu, GpuTotals
from cockpit.core.model import Figure, Unit, divide, make_figure

Across = Literal["count", "mean", "sum", "max", "any", "per_generated", "per_1k_prompt"]
"""How the GPUs' readings make the lane's figure; `any`: GPUs whose reading is > 0; the
`per_*`: the energy over the lane's own token counts of the window."""


class GpuFigureSpec(NamedTuple):
    key: str
    label: str
    unit: Unit
    reading: str
    """The `Gpu` field it reads."""
    across: Across
    definition: str


SPECS: tuple[GpuFigureSpec, ...] = tuple(
    GpuFigureSpec(*row)
    for row in (
        ("gpu_count", "GPUs", "count", "uuid", "count", "GPUs the lane's GPU source reads"),
        ("gpu_util", "GPU utilisation", "share", "util", "mean",
         "share of the window a kernel ran, mean over the GPUs"),
        ("gpu_memory_used_bytes", "GPU memory used", "bytes", "memory_used_bytes", "sum",
         "memory in use now, summed over the GPUs"),
        ("gpu_memory_total_bytes", "GPU memory", "bytes", "memory_total_bytes", "sum",
         "the GPUs' memory, summed"),
        ("gpu_power_w", "GPU power now", "watts", "power_w", "sum",
         "power drawn now, summed over the GPUs"),
        ("gpu_temp_max_c", "Hottest GPU now", "celsius", "temp_c", "max",
         "the highest GPU temperature now"),
        ("gpu_energy_j", "GPU energy", "joules", "energy_j", "sum",
         "increase of the GPUs' energy counters over the window"),
        ("joules_per_generated_token", "GPU energy per generated token", "joules", "energy_j",
         "per_generated", "GPU energy / the lane's generated tokens, same window"),
        ("joules_per_1k_prompt_tokens", "GPU energy per 1,000 prompt tokens", "joules",
         "energy_j", "per_1k_prompt", "GPU energy / the lane's prompt tokens × 1,000"),
        ("dram_active", "DRAM active", "share", "dram_active", "mean",
         "share of cycles the memory interface moved data, mean over the GPUs"),
        ("tensor_active", "Tensor pipes active", "share", "tensor_active", "mean",
         "share of cycles the tensor (HMMA) pipes were busy, mean over the GPUs"),
        ("sm_active", "SMs active", "share", "sm_active", "mean",
         "share of cycles an SM had a warp, mean over the GPUs"),
        ("gpu_xid_errors", "GPUs with an XID error", "count", "xid", "any",
         "GPUs that reported an XID error in the window"),
        ("gpu_power_throttled", "GPUs held by the power limit", "count", "throttle_power", "any",
         "GPUs whose clocks the power limit held down in the window"),
        ("gpu_thermal_throttled", "GPUs slowed by heat", "count", "throttle_thermal", "any",
         "GPUs whose clocks a thermal slowdown held down in the window"),
    )
)  # fmt: skip
NOW_READINGS = frozenset({"memory_used_bytes", "memory_total_bytes", "power_w", "temp_c"})
"""Readings of the read's moment: a window the reads don't cover does not concern them."""
SPEC_BY_KEY: Mapping[str, GpuFigureSpec] = {spec.key: spec for spec in SPECS}
NO_GPU_SOURCE = "no GPU source (the lane has no `gpu:` block)"
GPU_TREND = TrendSeries("gpu_util", "gpu_util", "GPU util", 1.0,
                        "GPU utilisation within each step: each GPU's mean in the step, the "
                        "mean over the lane's GPUs.")  # fmt: skip
NO_GPU_STEP = "its first step is not over yet"
"""Why a GPU source's trend has no point although it read GPUs."""
PER_GPU: tuple[GpuFigureSpec, ...] = tuple(s for s in SPECS if s.across in ("mean", "sum", "max"))
"""The figures each GPU has of its own (its reading itself)."""


@dataclass(frozen=True, slots=True)
class GpuFigures:
    """The lane's GPU figures, and each GPU's, by key."""

    figures: Mapping[str, Figure]
    per_gpu: tuple[tuple[Gpu, Mapping[str, Figure]], ...]
    source: str
    where: str
    reason: str = ""

    def value(self, key: str) -> float | None:
        figure = self.figures.get(key)
        return figure.value if figure is not None else None


def gpu_figures(
    totals: GpuTotals | None, generation_tokens: float | None, prompt_tokens: float | None
) -> GpuFigures | None:
    """The figures of `totals` (None: no GPU source), energy per token over the lane's tokens."""
    if totals is None:
        return None
    tokens = {"per_generated": generation_tokens, "per_1k_prompt": prompt_tokens}
    figures = {spec.key: _lane_figure(spec, totals, tokens) for spec in SPECS}
    per_gpu = tuple(
        (gpu, {s.key: _gpu_figure(s, gpu, totals) for s in PER_GPU}) for gpu in totals.gpus
    )
    return GpuFigures(figures, per_gpu, totals.source, totals.where, totals.reason)


def gpu_figure(totals: GpuTotals, key: str) -> Figure:
    """One of the lane's GPU figures of `totals` (one that reads no token count)."""
    return _lane_figure(SPEC_BY_KEY[key], totals, {})


def _why(spec: GpuFigureSpec, totals: GpuTotals) -> str:
    return totals.lacks.get(spec.reading) or totals.reason or "no GPU reports it"


def _gpu_figure(spec: GpuFigureSpec, gpu: Gpu, totals: GpuTotals) -> Figure:
    value = getattr(gpu, spec.reading)
    return make_figure(spec.key, spec.label, value, spec.unit, _why(spec, totals))


def _lane_figure(
    spec: GpuFigureSpec, totals: GpuTotals, tokens: Mapping[str, float | None]
) -> Figure:
    def figure(value: float | None, why: str = "", note: str = totals.reason) -> Figure:
        why = why or _why(spec, totals)
        return make_figure(spec.key, spec.label, value, spec.unit, why, note=note)

    if not totals.gpus:
        return figure(None, totals.reason or "no GPU read")
    if spec.across == "count":
        return figure(float(len(totals.gpus)))
    values = [v for gpu in totals.gpus if (v := getattr(gpu, spec.reading)) is not None]
    if not values:
        return figure(None)
    partial = f"{len(values)} of {len(totals.gpus)} GPUs" if len(values) < len(totals.gpus) else ""
    coverage = "" if spec.reading in NOW_READINGS else totals.coverage_note
    note = "; ".join(n for n in (partial, coverage, totals.reason) if n)
    if spec.across in tokens:
        count = tokens[spec.across]
        scale = 1000.0 if spec.across == "per_1k_prompt" else 1.0
        energy = divide(sum(values), count)
        why = "the lane's token count is missing" if count is None else "no tokens in the window"
        return figure(None if energy is None else energy * scale, why, note)
    if spec.across == "mean":
        return figure(sum(values) / len(values), note=note)
    if spec.across == "max":
        return figure(max(values), note=note)
    if spec.across == "any":
        return figure(float(sum(1 for v in values if v > 0)), note=note)
    return figure(sum(values), note=note)
