"""How bad the tail is: p50 / p90 / p99 of each latency beside its mean, from the engine's
histograms over the window. A quantile past the largest finite bucket reads `> 60 s`."""

from __future__ import annotations

from cockpit.figures import format_figure, merge_reasons
from cockpit.snapshot import LaneSnapshot

from .pane import MISSING, Cells, Line, Note, Pane, PaneView, Source, lane_source

LATENCIES: tuple[tuple[str, str, str, str], ...] = (
    ("ttft", "ttft_mean", "TTFT", "TTFT"),
    ("itl", "itl_mean", "Inter-token", "ITL"),
    ("e2e", "e2e_mean", "End-to-end", "E2E"),
    ("queue", "queue_mean", "Queue", "Queue"),
)
"""(quantile prefix, mean figure, label, short label), in the order a user asks."""
QUANTILES = ("p50", "p90", "p99")
COLUMN = 10
"""Cells per column: `> 60.00 s` fits with a cell to spare."""


class TailsPane(Pane):
    """Mean, p50, p90 and p99 of TTFT, inter-token, end-to-end and queue time."""

    TITLE = "Latency tails"

    def show(self, lane: LaneSnapshot | None, lane_configured: bool = True) -> None:
        self.view = tails_view(lane, lane_configured)


def _cell(engine: Source, key: str) -> str:
    figure = engine.get(key)
    return MISSING if figure is None or figure.missing else format_figure(figure)


def tails_view(lane: LaneSnapshot | None, lane_configured: bool = True) -> PaneView:
    engine = lane_source(lane, lane_configured)
    header = Cells("", ("mean", *QUANTILES), "muted", column=COLUMN, drop_first=True)
    lines: list[Line] = [header]
    for prefix, mean, label, short in LATENCIES:
        values = (_cell(engine, mean), *(_cell(engine, f"{prefix}_{q}") for q in QUANTILES))
        row = Cells(label, values, stale=engine.stale, column=COLUMN, short=short, drop_first=True)
        lines.append(row)
    figures = [engine.get(f"{p}_{q}") for p, *_ in LATENCIES for q in QUANTILES]
    reasons = merge_reasons(f.reason for f in figures if f is not None and f.missing and f.reason)
    if reasons:
        lines.append(Note(f"— {reasons}"))
    return PaneView(tuple(lines), (("lane", engine.freshness),))
