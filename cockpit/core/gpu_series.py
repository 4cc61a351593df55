"""What dcgm-exporter (`DCGM_FI_*`) and nvidia_gpu_exporter (`nvidia_smi_*`) call each GPU
reading: the PromQL, and the per-GPU values read back into `GpuTotals`. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

from cockpit.core.gpu import READINGS, Gpu, GpuTotals
from cockpit.core.promql import (
    Samples,
    sample_value,
    selector_with,
    selector_without,
    subquery_step,
)
from cockpit.core.timeutil import promql_duration

MIB = 2**20

Kind = Literal["now", "mean", "peak", "increase"]
"""How a reading is taken over the window: its value at the end, its mean, its largest, or a
counter's increase."""


@dataclass(frozen=True, slots=True)
class Series:
    """One reading as an exporter exposes it: its metric(s), how it is taken, its scale to SI;
    `labels` read beside the GPU's (the XID code, the name); `flag`: any value > 0 reads 1."""

    reading: str
    metrics: tuple[str, ...]
    kind: Kind
    scale: float = 1.0
    labels: tuple[str, ...] = ()
    flag: bool = False


@dataclass(frozen=True, slots=True)
class Exporter:
    name: str
    key: str
    """Short name in expression keys (`gpu.dcgm.util`)."""
    gpu_labels: tuple[str, str, str]
    """The labels of the GPU's uuid, index and name."""
    series: tuple[Series, ...]
    lacks: Mapping[str, str]
    """Why a reading may be absent, beyond "not exported"."""


_PROF = "not exported: dcgm-exporter serves it with -f dcp-metrics-included.csv (profiling)"
DCGM = Exporter(
    "dcgm-exporter",
    "dcgm",
    ("UUID", "gpu", "modelName"),
    (
        Series("util", ("DCGM_FI_DEV_GPU_UTIL",), "mean", 0.01),
        Series("memory_used_bytes", ("DCGM_FI_DEV_FB_USED",), "now", MIB),
        Series("memory_free_bytes", ("DCGM_FI_DEV_FB_FREE",), "now", MIB),
        Series("memory_reserved_bytes", ("DCGM_FI_DEV_FB_RESERVED",), "now", MIB),
        Series("power_w", ("DCGM_FI_DEV_POWER_USAGE",), "now"),
        Series("temp_c", ("DCGM_FI_DEV_GPU_TEMP",), "now"),
        Series("energy_j", ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",), "increase", 0.001),
        Series("dram_active", ("DCGM_FI_PROF_DRAM_ACTIVE",), "mean"),
        Series("tensor_active", ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",), "mean"),
        Series("sm_active", ("DCGM_FI_PROF_SM_ACTIVE",), "mean"),
        Series("xid", ("DCGM_FI_DEV_XID_ERRORS",), "peak"),
        Series("throttle_power", ("DCGM_FI_DEV_POWER_VIOLATION",), "increase", flag=True),
        Series("throttle_thermal", ("DCGM_FI_DEV_THERMAL_VIOLATION",), "increase", flag=True),
        Series("sm_clock_hz", ("DCGM_FI_DEV_SM_CLOCK",), "now", 1e6),
    ),
    {
        "dram_active": _PROF,
        "tensor_active": _PROF,
        "sm_active": "not exported: add DCGM_FI_PROF_SM_ACTIVE to dcgm-exporter's counters CSV",
        "throttle_power": "not exported: add DCGM_FI_DEV_POWER_VIOLATION to the counters CSV",
        "throttle_thermal": "not exported: add DCGM_FI_DEV_THERMAL_VIOLATION to the counters CSV",
    },
)

_SMI = "nvidia_smi_clocks_event_reasons_"
_NO_ACTIVITY = "nvidia_gpu_exporter has no activity counters (dcgm-exporter's DCGM_FI_PROF_* do)"
NVIDIA_SMI = Exporter(
    "nvidia_gpu_exporter",
    "smi",
    ("uuid", "index", "name"),
    (
        Series("info", ("nvidia_smi_gpu_info",), "now", labels=("index", "name")),
        Series("util", ("nvidia_smi_utilization_gpu_ratio",), "mean"),
        Series("memory_used_bytes", ("nvidia_smi_memory_used_bytes",), "now"),
        Series("memory_total_bytes", ("nvidia_smi_memory_total_bytes",), "now"),
        Series("power_w", ("nvidia_smi_power_draw_watts",), "now"),
        Series("temp_c", ("nvidia_smi_temperature_gpu",), "now"),
        Series("energy_j", ("nvidia_smi_energy_joules_total",), "increase"),
        Series("xid", ("nvidia_smi_xid_errors_total",), "increase", labels=("xid",)),
        Series(
            "throttle_power",
            (_SMI + "sw_power_cap", _SMI + "hw_power_brake_slowdown"),
            "peak",
            flag=True,
        ),
        Series(
            "throttle_thermal",
            (_SMI + "hw_thermal_slowdown", _SMI + "sw_thermal_slowdown"),
            "peak",
            flag=True,
        ),
        Series("sm_clock_hz", ("nvidia_smi_clocks_current_sm_clock_hz",), "now"),
    ),
    {
        "energy_j": "nvidia_smi_energy_joules_total is served by nvidia_gpu_exporter's NVML "
        "backend only",
        "xid": "no nvidia_smi_xid_errors_total series (counted by the exporter's NVML backend)",
        **dict.fromkeys(("dram_active", "tensor_active", "sm_active"), _NO_ACTIVITY),
    },
)
EXPORTERS = (DCGM, NVIDIA_SMI)


def expression_key(exporter: Exporter, series: Series) -> str:
    return f"gpu.{exporter.key}.{series.reading}"


def _series_selector(metrics: tuple[str, ...], selector: str) -> str:
    kept = selector_without(selector)  # as the lane's selector says it, spaces aside
    if len(metrics) == 1:
        return metrics[0] + kept
    return selector_with(f'__name__=~"{"|".join(metrics)}",{kept[1:-1]}')


def expression(
    exporter: Exporter, series: Series, selector: str, window_s: float, also: tuple[str, ...] = ()
) -> str:
    """One reading of every GPU the selector matches: a sample per GPU (and per `labels`, and
    `also`)."""
    window = promql_duration(window_s)
    by = f"max by ({', '.join(dict.fromkeys((*exporter.gpu_labels, *series.labels, *also)))})"
    metric = _series_selector(series.metrics, selector)
    if series.kind == "now":
        return f"{by} ({metric})"
    step = promql_duration(subquery_step(window_s))
    if series.kind == "mean":  # sampled like the lane's gauges; young data: the value now
        return f"({by} (avg_over_time(({by} ({metric}))[{window}:{step}])) or {by} ({metric}))"
    if len(series.metrics) > 1:  # flags of one GPU under several names: joined first
        return f"{by} (max_over_time(({by} ({metric}))[{window}:{step}]))"
    over = "max_over_time" if series.kind == "peak" else "increase"
    picked = " > 0" if series.labels else ""  # an XID code counts once it has occurred
    return f"{by} ({over}({metric}[{window}])){picked}"


def gpu_expressions(selector: str, window_s: float) -> dict[str, str]:
    """Every reading of both exporters, by expression key, to ride in the lane's query."""
    return {
        expression_key(exporter, series): expression(exporter, series, selector, window_s)
        for exporter in EXPORTERS
        for series in exporter.series
    }


def util_step_expression(selector: str, within_s: float) -> str:
    """The GPU utilisation of each step of a range query (`gpu_util`'s over the last
    `within_s`), of the first exporter that has one."""
    within = promql_duration(within_s)
    means = []
    for exporter in EXPORTERS:
        util = next(series for series in exporter.series if series.reading == "util")
        by = f"max by ({', '.join(exporter.gpu_labels)})"
        metric = _series_selector(util.metrics, selector)
        scale = "" if util.scale == 1 else f" * {util.scale:g}"
        means.append(f"(avg({by} (avg_over_time({metric}[{within}]))){scale})")
    return " or ".join(means)


Values = Mapping[str, Iterable[tuple[Mapping[str, str], float]]]
"""Expression key -> (labels, value) per series read."""


def values_from_samples(
    found: Mapping[str, Samples],
) -> dict[str, list[tuple[dict[str, str], float]]]:
    """A query's answer (split by `fig`) as Values; unreadable samples are left out."""
    values: dict[str, list[tuple[dict[str, str], float]]] = {}
    for key, samples in found.items():
        for sample in samples:
            number = sample_value(sample)
            if isinstance(number, float):
                labels = {str(k): str(v) for k, v in sample.get("metric", {}).items()}
                values.setdefault(key, []).append((labels, number))
    return values


def gpu_totals(
    values: Values, where: str, coverage_note: str = "", exporters: Iterable[Exporter] = EXPORTERS
) -> GpuTotals:
    """The GPUs of the first exporter with any reading among `values`."""
    for exporter in exporters:
        gpus = _gpus(exporter, values)
        if gpus:
            lacks = {
                r: exporter.lacks.get(r, "not exported by this exporter")
                for r in READINGS
                if all(getattr(gpu, r) is None for gpu in gpus)
            }
            return GpuTotals(exporter.name, where, gpus, lacks=lacks, coverage_note=coverage_note)
    reason = f"no GPU exporter's series (DCGM_FI_*, nvidia_smi_*) at {where}"
    return GpuTotals("", where, reason=reason)


def _gpus(exporter: Exporter, values: Values) -> tuple[Gpu, ...]:
    uuid_label, index_label, name_label = exporter.gpu_labels
    readings: dict[str, dict[str, float]] = {}
    labels_of: dict[str, dict[str, str]] = {}
    for series in exporter.series:
        for labels, value in values.get(expression_key(exporter, series), ()):
            uuid = labels.get(uuid_label, "")
            labels_of.setdefault(uuid, {}).update((k, v) for k, v in labels.items() if v)
            mine = readings.setdefault(uuid, {})
            if series.reading == "xid" and series.labels:  # the code is the label's
                value = max(mine.get("xid", 0.0), _number(labels.get("xid", "")))
            elif series.flag:
                value = 1.0 if value > 0 else 0.0
            mine[series.reading] = value * series.scale
    gpus = []
    for uuid, mine in readings.items():
        if uuid and set(mine) - {"info"}:
            used, total = mine.get("memory_used_bytes"), mine.get("memory_total_bytes")
            if total is None and used is not None and "memory_free_bytes" in mine:
                total = used + mine["memory_free_bytes"] + mine.get("memory_reserved_bytes", 0.0)
            own = {**{r: mine.get(r) for r in READINGS}, "memory_total_bytes": total}
            labels = labels_of[uuid]
            ident, name = labels.get(index_label, ""), labels.get(name_label, "")
            gpus.append(Gpu(ident, uuid, name, **cast(dict[str, Any], own)))
    return tuple(sorted(gpus, key=lambda g: (_number(g.id), g.uuid)))


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return 0.0
