"""How bad the tail is: p50 / p90 / p95 / p99 of each latency beside its mean over the window;
compact cells where room is short, then p90 gives way (p95 is the overview's column)."""

from __future__ import annotations

from dataclasses import replace

from cockpit.core.catalogue import LATENCIES, PERCENTILES, merge_reasons, slo_keys, tail_keys
from cockpit.core.figures import format_figure, format_value
from cockpit.core.model import Figure
from cockpit.core.slo import INTERPOLATED
from cockpit.core.snapshot import LaneSnapshot

from .pane import Cells, Line, Note, Pane, PaneView, Row, figure_text, lane_source

QUANTILES = tuple(f"p{p}" for p in PERCENTILES)
TAIL_KEYS = tuple(key for lat in LATENCIES for key in (lat.mean, *tail_keys(lat.histogram)))
"""The latency rows' figures, each mean then its tails (a table of cells, not rows)."""
NARROW = ("p50", "p95", "p99")
COLUMN = 10
"""Cells per column: `> 60.00 s` fits with a cell to spare."""
COMPACT_COLUMN = 8
"""Cells per column of the compact cells (`0.41s`, `>60s`), a cell fewer where room is short."""
FULL_WIDTH = Cells("", ()).min_label + (COLUMN - 1) * (1 + len(QUANTILES))
"""The narrowest pane the full cells fit, a cell narrower each (the pane's own squeeze)."""
COMPACT_WIDTH = Cells("", ()).min_label + (COMPACT_COLUMN - 1) * (1 + len(QUANTILES))


def compact_figure(figure: Figure) -> str:
    """`0.41s`, `19.2ms`, `>60s`, `<0.3s`: a tail in six cells or fewer."""
    if figure.above and figure.value is not None:
        return f">{figure.value:g}s"  # a bucket's bound: 60, 2.5, 7680
    if figure.below is not None:
        return f"<{figure.below:g}s"
    return format_figure(figure).replace(" ", "")


def tail_figure(figure: Figure) -> str:
    """A tail as the receipt has it, but `< 0.30 s` inside the first bucket: its bound."""
    if figure.below is not None:
        return f"< {format_value(figure.below, figure.unit)}"
    return format_figure(figure)


def _target_row(row: Row) -> Row:
    """A target's row, `≈` before a share interpolated between the engine's bounds."""
    if row.figure is not None and not row.figure.missing and INTERPOLATED in row.figure.reason:
        return replace(row, value=f"≈ {row.value}")
    return row


def tails_view(
    lane: LaneSnapshot | None,
    lane_configured: bool = True,
    compact: bool = False,
    quantiles: tuple[str, ...] = QUANTILES,
) -> PaneView:
    engine = lane_source(lane, lane_configured)
    column, shown = (COMPACT_COLUMN, compact_figure) if compact else (COLUMN, tail_figure)

    def cell(key: str) -> str:
        return figure_text(engine.get(key), shown)

    header = Cells("", ("mean", *quantiles), "muted", column=column, drop_first=True)
    lines: list[Line] = [header]
    for latency in LATENCIES:
        values = (cell(latency.mean), *(cell(f"{latency.histogram}_{q}") for q in quantiles))
        lines.append(Cells(latency.row, values, stale=engine.stale, column=column,
                           short=latency.short, drop_first=True))  # fmt: skip
    lines += [_target_row(engine.row(key)) for key in slo_keys(engine.figures)]
    figures = [engine.get(key) for latency in LATENCIES for key in tail_keys(latency.histogram)]
    said = (f.reason for f in figures if f is not None and (f.missing or f.doubtful) and f.reason)
    if reasons := merge_reasons(said):
        lines.append(Note(f"— {reasons}"))
    return PaneView(tuple(lines), (("lane", engine.freshness),))


class TailsPane(Pane):
    """Each latency's mean and quantiles; the share that met each target, the TTFT goodput."""

    BORDER_TITLE = "Latency tails"
    build = staticmethod(tails_view)
    read: tuple[LaneSnapshot | None, bool] | None = None
    squeezed: tuple[tuple[str, ...], PaneView] | None = None
    """The compact view drawn where full cells would leave the mean out, and its quantiles."""

    def show(self, lane: LaneSnapshot | None, lane_configured: bool = True) -> None:
        if self.read is None or self.read[0] is not lane or self.read[1] != lane_configured:
            self.read, self.squeezed = (lane, lane_configured), None
        super().show(lane, lane_configured)

    def shown(self, width: int) -> PaneView:
        if width >= FULL_WIDTH or self.read is None:
            return self.view
        quantiles = QUANTILES if width >= COMPACT_WIDTH else NARROW
        if self.squeezed is None or self.squeezed[0] != quantiles:
            self.squeezed = quantiles, tails_view(*self.read, compact=True, quantiles=quantiles)
        return self.squeezed[1]
