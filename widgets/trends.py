"""Is the lane getting better or worse: a sparkline per figure across the window at the trend's
step (in the title), the latest point beside it."""

from __future__ import annotations

from textual.content import Content

from cockpit.core.catalogue import FIGURES, MEAN_PER_STEP, TRENDS, TrendSeries
from cockpit.core.figures import format_value
from cockpit.core.gpu import GpuTotals
from cockpit.core.gpu_figures import GPU_TREND, NO_GPU_STEP
from cockpit.core.model import Trend
from cockpit.core.snapshot import LaneSnapshot

from .pane import Line, Note, Pane, PaneView, Spark, lane_source


def step_text(step_s: float) -> str:
    """`step 15 s`, `step 1 min`, `step 2 h`."""
    if step_s < 60:
        return f"step {step_s:.0f} s"
    if step_s < 3600:
        return f"step {step_s / 60:g} min"
    return f"step {step_s / 3600:g} h"


def trends_view(lane: LaneSnapshot | None, lane_configured: bool = True) -> PaneView:
    engine = lane_source(lane, lane_configured)
    trend = lane.totals.trend if lane is not None and lane.totals is not None else None
    if trend is None:
        lines: tuple[Line, ...] = (Note("no trend read yet" if lane else engine.absent),)
    elif not any(point is not None for points in trend.series.values() for point in points):
        lines = (Note("no points in the window yet"),)
    else:
        lines = tuple(_spark(trend, series, engine.stale) for series in TRENDS)
        lines += _gpu_spark(trend, lane.totals.gpu, engine.stale) if lane and lane.totals else ()
        lines += (Note(MEAN_PER_STEP),) if any(series.mean for series in TRENDS) else ()
    return PaneView(lines, (("lane", engine.freshness),))


def _spark(trend: Trend, series: TrendSeries, stale: bool) -> Spark:
    points = trend.series.get(series.key, ())
    latest = next((point for point in reversed(points) if point is not None), None)
    unit = FIGURES[series.figure].unit if series.figure in FIGURES else "share"
    return Spark(series.label, tuple(points), format_value(latest, unit), series.top, stale=stale)


def _gpu_spark(trend: Trend, gpu: GpuTotals | None, stale: bool) -> tuple[Line, ...]:
    """GPU utilisation's sparkline, or why its source read none; nothing without a source."""
    if gpu is None:
        return ()
    if any(point is not None for point in trend.series.get(GPU_TREND.key, ())):
        return (_spark(trend, GPU_TREND, stale),)
    return (Note(f"{GPU_TREND.label}: {gpu.reason or NO_GPU_STEP}"),)


class TrendsPane(Pane):
    """Hit rate, TTFT p95, step, generation tok/s, running, waiting, KV use, GPU use."""

    BORDER_TITLE = "Trends"
    build = staticmethod(trends_view)

    def show(self, lane: LaneSnapshot | None, lane_configured: bool = True) -> None:
        trend = lane.totals.trend if lane is not None and lane.totals is not None else None
        title = f"Trends · {step_text(trend.step_s)}" if trend is not None else self.BORDER_TITLE
        if trend is not None and trend.rates_over_s is not None:
            title += f" · rates over {step_text(trend.rates_over_s).removeprefix('step ')}"
        if str(self.border_title) != title:
            self.border_title = Content(title)
        super().show(lane, lane_configured)
