"""The GPU line of the vital strip: each GPU's utilisation, memory, power and temperature when
they fit on one line, the lane's GPUs together when they don't; why, when none were read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from cockpit.core.figures import format_figure, format_value
from cockpit.core.gpu_figures import GpuFigures
from cockpit.core.model import Figure

from .pane import MISSING, Tone, short_reason

Item = tuple[str, str, Tone]
GIB = 2**30
"""Memory in GiB, as nvidia-smi and the exporters' MiB read (an `80GB` H100 has 79.6)."""


@dataclass(frozen=True, slots=True)
class GpuView:
    """The GPU line two ways: a cell per GPU, and the GPUs together; `note` beside either."""

    cells: tuple[Item, ...] = ()
    together: tuple[Item, ...] = ()
    note: tuple[Item, ...] = ()


NO_GPU = GpuView()
"""A lane without a GPU source: no line."""

FLAGGED_BY = {
    "gpu_xid_errors": "gpu",
    "gpu_memory_used_bytes": "mem",
    "gpu_power_throttled": "power",
}
"""A GPU health finding's figure -> the item of the together view it colours."""


def _shown(figure: Figure | None) -> str:
    return MISSING if figure is None or figure.missing else format_figure(figure)


def _memory(used: Figure | None, total: Figure | None) -> str:
    """`71.5/80 GiB`: in use of the memory there is."""
    if used is None or used.value is None:
        return MISSING
    gib = used.value / GIB
    shown = f"{gib:.1f}" if gib < 100 else f"{gib:,.0f}"
    if total is None or total.value is None:
        return f"{shown} GiB"
    return f"{shown}/{total.value / GIB:,.0f} GiB"


def _readings(figures: Mapping[str, Figure]) -> tuple[str, str, str, str]:
    get = figures.get
    return (
        _shown(get("gpu_util")),
        _memory(get("gpu_memory_used_bytes"), get("gpu_memory_total_bytes")),
        _shown(get("gpu_power_w")),
        _shown(get("gpu_temp_max_c")),
    )


def gpu_view(gpu: GpuFigures | None, flagged: Mapping[str, Tone]) -> GpuView:
    """The line of a lane's GPU figures (None: no GPU source); an item whose figure a GPU
    health rule flags takes the rule's colour."""
    if gpu is None:
        return NO_GPU
    name = f"GPU {gpu.source}".rstrip() + ":"
    if not gpu.per_gpu:
        reason = short_reason(gpu.reason) or "no GPU read"
        return GpuView(note=((name, reason, "alarm" if gpu.reason else "muted"),))
    tones = {item: flagged[key] for key, item in FLAGGED_BY.items() if key in flagged}
    cells: tuple[Item, ...] = tuple(
        (f"GPU {one.id or one.uuid}", " ".join(_readings(figures)), "plain")
        for one, figures in gpu.per_gpu
    )
    util, memory, power, temp = _readings(gpu.figures)
    count = format_value(gpu.value("gpu_count"), "count")
    together: tuple[Item, ...] = (
        ("GPUs", count, tones.get("gpu", "plain")),
        ("util", util, "plain"),
        ("mem", memory, tones.get("mem", "plain")),
        ("power", power, tones.get("power", "plain")),
        ("hottest", temp, "plain"),
    )
    note: tuple[Item, ...] = (("", short_reason(gpu.reason), "warn"),) if gpu.reason else ()
    return GpuView(cells, together, note)
