"""The roofline's plot: the roofs on log-log axes and the lane's points, drawn by plotext,
plotted again only when its `PlotSpec` changes, and only once for each of the last few."""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import NamedTuple, Self

from textual.app import RenderResult
from textual.color import Color
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.style import Style
from textual.visual import Visual, visualize
from textual.widget import Widget
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from cockpit.roofline.model import RooflineView
from cockpit.roofline.table import intensity_text

TITLE_MIN_HEIGHT = 20
"""Below this pane height, no axis labels (and no roofs line in the caption): rows are short."""

LETTERS = {"prefill": "P", "decode": "D", "measured": "M", "gpu": "G"}
"""Each point's letter, in the order of the operating points."""


Axes = tuple[float, float, float, float]
"""Log10 ranges of the plot: x from, x to, y from, y to."""


@dataclass(frozen=True, slots=True)
class Mark:
    """A point's letter, colour and log10 place on the plot's grid (`PlotSpec.grid`)."""

    letter: str
    colour: tuple[int, int, int]
    x: float
    y: float


@dataclass(frozen=True, slots=True)
class PlotSpec:
    """Everything the plot draws: equal specs draw the same plot."""

    ridge: float
    peak: float
    bandwidth: float
    """log10 of the ridge intensity, the peak FLOP/s and the bandwidth."""
    axes: Axes
    marks: tuple[Mark, ...]
    x_ticks: int
    x_label: str | None
    """The axis labels, when the pane is tall enough for them."""
    colours: tuple[tuple[int, int, int], tuple[int, int, int]]
    """The roofs' and the ridge's."""
    grid: tuple[int, int]
    """The steps across and down the axes that points are placed on: the canvas's cells less
    one (plotext draws a letter at the nearest of them), or twice the plot's size until the
    canvas at these axes has been measured."""


class Canvas(NamedTuple):
    """The plot area plotext drew inside its frame, in cells, for a plot size, axes and labels."""

    size: Size
    axes: Axes
    labelled: bool
    columns: int
    rows: int

    @classmethod
    def measured(cls, lines: list[str], size: Size, spec: PlotSpec) -> Canvas | None:
        """The canvas framed by `┌…┐` and `└` in a plot's `lines` (None: no frame found)."""
        top = next((y for y, line in enumerate(lines) if "┌" in line and "┐" in line), None)
        if top is None:
            return None
        bottom = next((y for y in range(top + 1, len(lines)) if "└" in lines[y]), None)
        columns = lines[top].rindex("┐") - lines[top].index("┌") - 1
        if bottom is None or columns < 2 or bottom - top - 1 < 2:
            return None
        return cls(size, spec.axes, spec.x_label is not None, columns, bottom - top - 1)

    @property
    def grid(self) -> tuple[int, int]:
        return self.columns - 1, self.rows - 1


HOLD_STEPS = 0.6
"""A point stays where it is drawn until it is this many grid steps away: a value on the edge
between two steps does not move it to and fro (and re-plot) at each refresh."""


def plot_spec(
    view: RooflineView,
    pane: Size,
    plot: Size,
    theme: dict[str, str],
    drawn: PlotSpec | None = None,
    canvas: Canvas | None = None,
) -> PlotSpec:
    """The spec of `view` in a pane and plot of these sizes, in the theme's colours; a point
    is kept where `drawn` (the spec shown at this size) has it while it is near. Points are
    placed on the cells of `canvas` when it was measured at this size, axes and labels: a
    point moved is a letter moved, and one that stays in its cell is not plotted again."""
    hw, points = view.hw, view.points
    named = (points.prefill, points.decode, points.measured, points.gpu) if points else ()
    plotted = [
        (name, point)
        for name, point in zip(LETTERS, named, strict=False)
        if point is not None and math.isfinite(point.intensity) and point.flops > 0
    ]
    xs = [point.intensity for _, point in plotted] + [1.0, hw.ridge * 10]
    ys = [math.log10(point.achieved_flops_per_s) for _, point in plotted]
    x_lo, x_hi = math.floor(math.log10(min(xs))), math.ceil(math.log10(max(xs)))
    y_lo = math.floor(min([math.log10(hw.bandwidth * 10.0**x_lo), *ys]))
    y_hi = _y_top(math.log10(hw.peak_flops), ys)
    axes = (x_lo, x_hi, y_lo, y_hi)
    labels = pane.height >= TITLE_MIN_HEIGHT
    grid = (2 * plot.width, 2 * plot.height)
    if canvas is not None and (canvas.size, canvas.axes, canvas.labelled) == (plot, axes, labels):
        grid = canvas.grid
    same_grid = drawn is not None and drawn.axes == axes and drawn.grid == grid
    held = {m.letter: m for m in drawn.marks} if drawn is not None and same_grid else {}
    marks: list[Mark] = []
    for (name, point), log_flops in zip(plotted, ys, strict=True):
        letter = LETTERS[name]
        was = held.get(letter)
        held_x, held_y = (None, None) if was is None else (was.x, was.y)
        x = _place(math.log10(point.intensity), x_lo, x_hi, grid[0], held_x)
        y = _place(log_flops, y_lo, y_hi, grid[1], held_y)
        marks.append(Mark(letter, _theme_rgb(theme, name), x, y))
    return PlotSpec(
        math.log10(hw.ridge),
        math.log10(hw.peak_flops),
        math.log10(hw.bandwidth),
        axes,
        tuple(marks),
        max(2, pane.width // 6),
        f"FLOP/byte (ridge {intensity_text(hw.ridge)})" if labels else None,
        (_theme_rgb(theme, "roof"), _theme_rgb(theme, "ridge")),
        grid,
    )


def _place(value: float, lo: float, hi: float, steps: int, held: float | None) -> float:
    """`value` at its nearest of `steps` steps from `lo` to `hi`, kept inside them; at `held`
    (where it is drawn) while within `HOLD_STEPS` of it."""
    step = (hi - lo) / max(steps, 1)
    if held is not None and abs(value - held) <= HOLD_STEPS * step:
        return held
    return lo + step * min(max(round((value - lo) / step), 0), steps)


def _y_top(peak: float, ys: list[float]) -> float:
    """Twice the peak, or up to the next half decade over a point above its roof (a wrong
    profile is shown as it is, and a point moving a little there does not rescale the plot)."""
    top = peak + 0.3
    highest = max(ys, default=top)
    return top if highest <= top else math.ceil(2.0 * (highest + 0.05)) / 2.0


_DECADE_PREFIXES = {0: "", 1: "k", 2: "M", 3: "G", 4: "T", 5: "P", 6: "E"}


def decade_label(exponent: int) -> str:
    """`1`, `10`, `100`, `1k`, ... `100T`, `1P` for 10**exponent (0.1 and 0.01 below 1)."""
    if exponent < 0:
        return f"{10.0**exponent:g}"
    thousands, rest = divmod(exponent, 3)
    return f"{10**rest}{_DECADE_PREFIXES.get(thousands, f'e{3 * thousands}')}"


def _decade_ticks(lo: float, hi: float, room: int) -> tuple[list[float], list[str]]:
    """Ticks at whole decades, thinned until `room` of them fit."""
    decades = list(range(math.ceil(lo), math.floor(hi) + 1))
    step = max(1, math.ceil(len(decades) / max(room, 1)))
    chosen = decades[::step]
    return [float(d) for d in chosen], [decade_label(d) for d in chosen]


COLOURS = {
    "roof": "text-primary",
    "ridge": "foreground-darken-3",
    "prefill": "text-warning",
    "decode": "text-success",
    "measured": "text-secondary",
    "gpu": "text-accent",
}
"""The theme variable each part is drawn in (the readable `text-*` shades)."""


def _theme_rgb(variables: dict[str, str], part: str) -> tuple[int, int, int]:
    return Color.parse(variables[COLOURS[part]]).rgb


def draw_spec(plt: Plot, spec: PlotSpec) -> None:
    """Plot `spec` on a cleared plotext figure."""
    x_lo, x_hi, y_lo, y_hi = spec.axes
    plt.plot(
        [x_lo, spec.ridge, x_hi],
        [spec.bandwidth + x_lo, spec.peak, spec.peak],
        marker="braille",
        color=spec.colours[0],
    )
    plt.vline(spec.ridge, spec.colours[1])
    for mark in spec.marks:  # after the roofs: a letter is drawn over them
        plt.scatter([mark.x], [mark.y], marker=mark.letter, color=mark.colour)
    plt.xlim(x_lo, x_hi)
    plt.ylim(y_lo, y_hi)
    plt.xticks(*_decade_ticks(x_lo, x_hi, room=spec.x_ticks))
    plt.yticks(*_decade_ticks(y_lo, y_hi, room=6))
    if spec.x_label is not None:
        plt.xlabel(spec.x_label)
        plt.ylabel("FLOP/s")


class Drawing(NamedTuple):
    """What the plot's lines are drawn from: equal drawings draw the same lines."""

    spec: PlotSpec | None
    size: Size
    style: Style
    theme: str


PLOTS_KEPT = 16
"""Plots kept drawn: a lane's points move to and fro between a few places of the grid."""


class RoofPlot(PlotextPlot):
    """The roofs and points, plotted again only when the spec at the current size changes;
    the lines of the last few plots are kept, and shown again when their drawing comes back."""

    view: RooflineView | None = None
    plotted: PlotSpec | None = None
    """The spec plotext holds now."""
    strips: list[Strip] | None = None
    """The lines shown; None when refreshed since (they are drawn, or found kept, again)."""
    shown: Drawing | None = None
    """What the lines shown were drawn from."""
    canvas: Canvas | None = None
    """The canvas of the last plot drawn, measured on its lines."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.kept: OrderedDict[Drawing, list[Strip]] = OrderedDict()
        """The lines of the last plots drawn, by their `drawing`, the latest last."""

    def on_mount(self) -> None:
        # "clear" leaves background and text to the pane's styles, which follow the app
        # theme; the roofs and points take the theme's colours when plotted.
        self.theme = "clear"
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh())

    def show(self, view: RooflineView | None) -> None:
        self.view = view
        if self.is_mounted and self.drawing() != self.shown:
            self.refresh()

    def drawing(self) -> Drawing:
        """What the plot's lines are drawn from now."""
        return Drawing(self.spec(), self.size, self.visual_style, self.app.theme)

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        if repaint:
            self.strips = None
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def render_line(self, y: int) -> Strip:
        if self.text_selection is not None:  # the selection is drawn over the plot as rendered
            return super().render_line(y)
        if self.strips is None or self.shown is None or self.shown.size != self.size:
            self.strips = self.plot_lines()
        if y < len(self.strips):
            return self.strips[y]
        return Strip.blank(self.size.width, self.visual_style.rich_style)

    def plot_lines(self) -> list[Strip]:
        """The lines of the plot as it is drawn now: kept ones, or plotted afresh. A plot
        drawn afresh measures the canvas; the first at a size, axes and labels, its points
        placed on a finer grid until then, is plotted again with them on the canvas's cells."""
        drawing = self.shown = self.drawing()
        strips = self.kept.pop(drawing, None)
        if strips is None:
            strips = self.plotted_lines()
            if drawing.spec is not None and self.measure(drawing.spec, strips):
                drawing = self.shown = self.drawing()
                strips = self.kept.pop(drawing, None) or self.plotted_lines()
        self.kept[drawing] = strips
        while len(self.kept) > PLOTS_KEPT:
            self.kept.popitem(last=False)
        return strips

    def plotted_lines(self) -> list[Strip]:
        """The lines of the spec now, plotted by plotext (`render`)."""
        width, height = self.size
        return Visual.to_strips(
            self, visualize(self, self.render()), width, height, self.visual_style
        )

    def measure(self, spec: PlotSpec, strips: list[Strip]) -> bool:
        """Measure the canvas on the lines of `spec`'s plot: whether its points are to be
        placed again, on the canvas's cells."""
        canvas = Canvas.measured([strip.text for strip in strips], self.size, spec)
        if canvas is None:
            return False
        self.canvas = canvas
        return spec.grid != canvas.grid

    def spec(self) -> PlotSpec | None:
        """The spec of the view at the pane's and plot's current sizes and theme."""
        if self.view is None:
            return None
        pane = self.parent.outer_size if isinstance(self.parent, Widget) else self.outer_size
        shown = self.shown
        drawn = shown.spec if shown is not None and shown.size == self.size else None
        theme = self.app.theme_variables
        return plot_spec(self.view, pane, self.size, theme, drawn, self.canvas)

    def render(self) -> RenderResult:
        spec = self.spec()
        if spec != self.plotted:
            self.plotted = spec
            self.plt.clear_figure()
            if spec is not None:
                draw_spec(self.plt, spec)
        return super().render()
