"""The mini roofline pane: the plot (roofplot.py) above a caption, or the caption alone when
the pane is too small to plot."""

from __future__ import annotations

from collections.abc import Sequence

from textual.app import ComposeResult
from textual.content import Content
from textual.events import Resize
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget

from cockpit.core.text import visible
from cockpit.roofline.model import (
    GPU_POINT_LEGEND,
    MeasuredPoint,
    OperatingPoints,
    RooflineView,
    RoofPoint,
)
from cockpit.roofline.table import intensity_text, rate_text, si

from .pane import BORDER_ROWS, LinesWidget
from .roofplot import TITLE_MIN_HEIGHT, RoofPlot

MIN_PLOT_WIDTH = 32
MIN_PLOT_HEIGHT = 12
WIDE_CAPTION_WIDTH = 56

ABOVE_ROOF = "  above the roof: check the hardware/model profile"
ABOVE_ROOF_COMPACT = "above roof: check hw/model profile"
"""Under the points when one is above its roof (34 cells: a 38-cell pane, two columns at 80)."""


def _point_line(letter: str, point: RoofPoint, compact: bool) -> str:
    flops = si(point.achieved_flops_per_s, "FLOP/s")
    intensity = intensity_text(point.intensity)
    if compact:
        return f"{letter} {flops} I {intensity} {point.pct_of_roof:.0f}%"
    return f"{letter} {flops} · I {intensity} · {point.pct_of_roof:.0f}% of roof"


def _decode_lines(points: OperatingPoints, compact: bool) -> list[str]:
    decode, ceiling = points.decode, points.decode_ceiling_tokens_per_s
    if decode is None:
        return [f"D — {points.decode_reason}"]
    if ceiling is None:
        return [_point_line("D", decode, compact)]
    # The batch is a mean of running requests: 3.5 shown as 4 would name another ceiling.
    size = f"{decode.batch:.1f}".removesuffix(".0")
    batch = f"B {size}" if compact else f"batch {size}"
    return [_point_line("D", decode, compact), f"  ceiling {rate_text(ceiling)} at {batch}"]


def _measured_lines(measured: MeasuredPoint | None, reason: str, compact: bool) -> list[str]:
    if measured is None:  # no measured counters is common: only a stalled measurement is news
        return [] if reason.endswith("missing") else [f"M — {reason}"]
    ratio = measured.flops_ratio
    extra = "" if ratio is None else f" ×{ratio:.2g}" if compact else f" · ×{ratio:.2g} model"
    return [_point_line("M", measured, compact) + extra]


LEGEND = (
    "P prefill · D decode step · M engine-measured",
    "I FLOP/byte · % of roof: achieved ÷ roof at I",
)


def caption_lines(
    view: RooflineView | None, *, title: bool = True, compact: bool = False, legend: bool = False
) -> list[str]:
    """Each point's FLOP/s, intensity and % of roof, the decode ceiling; `title` adds the roofs,
    `compact` drops the filler words, `legend` says what the letters and the % are."""
    if view is None:
        return ["no hardware or model profile"]
    hw = view.hw
    roofs = f"ridge {intensity_text(hw.ridge)} · peak {si(hw.peak_flops, 'FLOP/s')}"
    lines = [roofs] if title else []
    points = view.points
    if points is None:
        return [*lines, "no live figures yet: roofs only"]
    prefill = points.prefill
    lines.append(_point_line("P", prefill, compact) if prefill else f"P — {points.prefill_reason}")
    lines += _decode_lines(points, compact)
    lines += _measured_lines(points.measured, points.measured_reason, compact)
    if points.gpu is not None:  # G: only for a lane whose GPUs give their activity
        lines.append(_point_line("G", points.gpu, compact))
    if points.above_roof:
        lines.append(ABOVE_ROOF_COMPACT if compact else ABOVE_ROOF)
    gpu_legend = [GPU_POINT_LEGEND] if points.gpu is not None else []
    return [*lines, *LEGEND, *gpu_legend] if legend else lines


def pane_title(view: RooflineView | None) -> str:
    return "Roofline" if view is None else f"Roofline · {view.hw.id} · {view.model.id}"


def is_text_only(pane: Size) -> bool:
    return pane.width < MIN_PLOT_WIDTH or pane.height < MIN_PLOT_HEIGHT


def caption_at(view: RooflineView | None, pane: Size, own_height: bool = False) -> list[str]:
    """The caption in a pane of this outer size; one as tall as its plot and caption has room
    for the roofs line and the legend."""
    title = own_height or is_text_only(pane) or pane.height >= TITLE_MIN_HEIGHT
    compact = pane.width < WIDE_CAPTION_WIDTH
    return caption_lines(view, title=title, compact=compact, legend=own_height)


class Caption(LinesWidget):
    """The words under the plot."""

    lines: tuple[str, ...] = ()

    def show(self, lines: tuple[str, ...]) -> None:
        old, self.lines = self.lines, lines
        self.redraw(old, lines)

    def line_keys(self, width: int) -> Sequence[str]:
        return self.lines

    def line_content(self, y: int, width: int) -> Content:
        return Content(self.lines[y])


class RooflinePane(Widget):
    """The mini roofline of one lane: roofs, ridge, P/D/M points and their caption."""

    DEFAULT_CSS = """
    RooflinePane {
        layout: vertical;
        height: 1fr;
        min-height: 5;
        border: round $foreground 35%;
        border-title-color: $primary;
        border-title-style: bold;
        padding: 0 1;
        color: $foreground;
    }
    RooflinePane > #roofline-plot { height: 1fr; }
    RooflinePane > #roofline-caption {
        height: auto;
        color: $text-muted;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    RooflinePane.-text-only > #roofline-plot { display: none; }
    RooflinePane.-text-only > #roofline-caption { color: $foreground; }
    """

    view: reactive[RooflineView | None] = reactive(None, init=False, repaint=False)
    """An equal view draws nothing; the plot and caption redraw themselves."""

    def __init__(
        self, *, id: str | None = None, classes: str | None = None, own_height: bool = False
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.own_height = own_height
        """As tall as its plot (its CSS height) and caption, rather than what it is given."""
        self.border_title = Content(pane_title(None))
        self.plot = RoofPlot(id="roofline-plot")
        self.caption = Caption(id="roofline-caption")

    def compose(self) -> ComposeResult:
        yield self.plot
        yield self.caption

    def show(self, view: RooflineView | None) -> None:
        self.view = view

    def watch_view(self, old: RooflineView | None, view: RooflineView | None) -> None:
        title = pane_title(view)
        if title != pane_title(old):
            self.border_title = Content(visible(title))
        self.draw()

    def on_resize(self, _event: Resize) -> None:
        size = self.outer_size
        narrow = size.width < MIN_PLOT_WIDTH
        self.set_class(narrow if self.own_height else is_text_only(size), "-text-only")
        self.draw()

    def draw(self) -> None:
        """The caption and the plot of the view at the pane's size."""
        lines = caption_at(self.view, self.outer_size, self.own_height)
        self.caption.show(tuple(visible(line) for line in lines))
        self.plot.show(self.view)
        if self.own_height:
            height = self.plot.styles.height
            plot_rows = 0 if self.has_class("-text-only") or height is None else height.cells or 0
            rows = plot_rows + len(lines) + BORDER_ROWS
            self.styles.height = rows
            self.styles.row_span = rows  # in the cockpit's grid of one-cell rows
