"""A window's lane figures (the catalogue evaluated over its totals) and how any figure reads:
the TUI, `cockpit report` and the overview all use these. Pure."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

from cockpit.core.catalogue import evaluate, section_of
from cockpit.core.model import Figure, LaneTotals, Unit, frozen_map
from cockpit.core.slo import NO_SLO, Slo
from cockpit.roofline.model import LaneLoad

# --- formatting ---------------------------------------------------------------------------

SI_PREFIXES = ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
"""Metric prefixes, largest first: one set for tokens, bytes and FLOPs (`1 GB/s`, `1.2 G`)."""


def si(value: float, digits: int = 4, unit: str = "") -> str:
    """`13.96 G`, `75.6 M`, `1 GB/s`, `950 B/s`: `digits` significant figures, trailing zeros
    dropped, the metric prefix on the unit."""
    for scale, prefix in SI_PREFIXES:
        if abs(value) >= scale * (1 - 0.5 * 10.0**-digits):  # 999,999 is `1 M`, not `1,000 k`
            return f"{_significant(value / scale, digits)} {prefix}{unit}"
    return f"{_significant(value, digits)} {unit}".rstrip()


def _significant(value: float, digits: int) -> str:
    if value == 0:
        return "0"
    magnitude = math.floor(math.log10(abs(value)))
    decimals = max(0, digits - 1 - magnitude)
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _seconds(value: float) -> str:
    if 0 < value < 0.001:  # a queue of 37 µs is not "0.0 ms"
        return f"{value * 1e6:.0f} µs"
    if value < 0.1:
        return f"{value * 1000:.1f} ms"
    if value < 100:
        return f"{value:.2f} s"
    return f"{value:,.0f} s"


_SI_UNITS = {"flop/s": "FLOP/s", "bytes/s": "B/s", "bytes": "B", "watts": "W", "joules": "J"}
_FORMATS: Mapping[str, Callable[[float], str]] = {
    "share": lambda value: f"{value * 100:.1f}%",
    "ratio": lambda value: f"{value:,.1f} : 1" if value < 100 else f"{value:,.0f} : 1",
    "seconds": _seconds,
    "number": lambda value: _significant(value, 3),
    **dict.fromkeys(
        ("tokens", "count", "units"),
        lambda value: f"{value:,.0f}" if abs(value) < 1e6 else si(value),
    ),
    "tok/s": lambda value: f"{value:,.0f} tok/s" if value < 1e4 else f"{si(value)} tok/s",
    **{unit: partial(si, unit=prefixed) for unit, prefixed in _SI_UNITS.items()},
    "celsius": lambda value: f"{value:.0f} °C",
    # A cost under a cent keeps its digits (not "$0.00").
    "usd": lambda value: f"${value:,.2f}" if value >= 0.01 or value == 0 else f"${value:.4f}",
}
"""Unit -> how a value of it reads (any other: three significant digits)."""


def format_value(value: float | None, unit: Unit, above: bool = False) -> str:
    """How a figure reads on screen and in receipts: `—` when missing, `> 60 s` if `above`.
    The value is read to 12 significant digits first: float noise (0.375 ± 1e-16, a quantile
    worked out again from the same data) changes no text."""
    if value is None:
        return "—"
    value = float(f"{value:.12g}")
    if above:
        return f"> {format_value(value, unit)}"
    own = _FORMATS.get(unit)
    return own(value) if own else f"{value:,.3g}"


def format_figure(figure: Figure) -> str:
    return format_value(figure.value, figure.unit, figure.above)


# --- the lane -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LaneFigures:
    figures: Mapping[str, Figure] = field(default_factory=frozen_map)

    def __getitem__(self, key: str) -> Figure:
        return self.figures[key]

    def value(self, key: str) -> float | None:
        figure = self.figures.get(key)
        return figure.value if figure else None

    @property
    def engine_keys(self) -> tuple[str, ...]:
        """The figures of what else the engine says (a receipt's own table), in order."""
        return tuple(key for key in self.figures if section_of(key) == "engine")


def lane_figures(totals: LaneTotals, host_kv_tokens: float = 0.0, slo: Slo = NO_SLO) -> LaneFigures:
    """Every lane figure of the catalogue from one refresh's raw totals."""
    return LaneFigures(frozen_map(evaluate(totals, host_kv_tokens=host_kv_tokens, slo=slo)))


def lane_load(figures: LaneFigures, gpus: int = 1) -> LaneLoad:
    """The figures the roofline's operating points are made of, for the lane as a whole.
    The engine's MFU counters are per GPU; the lane's roof is all its GPUs together."""
    value = figures.value
    flops, moved = value("measured_flops"), value("measured_bytes")
    return LaneLoad(
        effective_prefill_rate=value("effective_prefill_rate"),
        mean_prompt=value("mean_prompt"),
        mean_fresh_prefill=value("mean_fresh_prefill"),
        mean_generated=value("mean_generated"),
        running=value("running"),
        itl_s=value("itl_mean"),
        tokens_per_step=value("tokens_per_step"),
        measured_flops_per_s=None if flops is None else flops * gpus,
        measured_bytes_per_s=None if moved is None else moved * gpus,
    )
