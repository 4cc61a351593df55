"""The mini roofline pane: the roofs on log-log axes, the lane's points, and a caption.

It renders from a `RooflineView` only. The plot is a textual-plotext `PlotextPlot`, cleared and
plotted again only when its `PlotSpec` changes: the roofs, the axes, the layout, the theme's
colours, or a point moving to another spot of a grid finer than the plot's cells. A point
moving a little within its spot draws nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from textual.app import ComposeResult, RenderResult
from textual.color import Color
from textual.content import Content
from textual.events import Resize
from textual.geometry import Size
from textual.reactive import reactive
from textual.widget import Widget
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from cockpit.roofline import MeasuredPoint, OperatingPoints, RooflineView, RoofPoint
from cockpit.roofline_table import intensity_text, rate_text, si

from .pane import visible

__all__ = ["RooflinePane", "RooflineView", "caption_lines"]

MIN_PLOT_WIDTH = 32
MIN_PLOT_HEIGHT = 12
TITLE_MIN_HEIGHT = 20
"""Below this height the plot keeps the rows: no roofs line in the caption, no axis labels."""
WIDE_CAPTION_WIDTH = 56

LETTERS = {"prefill": "P", "decode": "D", "measured": "M"}

ABOVE_ROOF = "  above the roof: check the hardware/model profile"
ABOVE_ROOF_COMPACT = "above roof: check hw/model profile"
"""Under the points when one is above its roof; on a line of its own, as the points' lines
have no room left for it (34 cells: a 38-cell pane, as in two columns at 80)."""


# --- the caption: pure text ------------------------------------------------------------------


def _point_line(letter: str, point: RoofPoint, compact: bool) -> str:
    flops = si(point.achieved_flops_per_s, "FLOP/s")
    intensity = intensity_text(point.intensity)
    if compact:
        return f"{letter} {flops} I {intensity} {point.pct_of_roof:.0f}%"
    return f"{letter} {flops} · I {intensity} · {point.pct_of_roof:.0f}% of roof"


def _decode_lines(points: OperatingPoints, compact: bool) -> list[str]:
    decode = points.decode
    if decode is None:
        return [f"D — {points.decode_reason}"]
    lines = [_point_line("D", decode, compact)]
    ceiling = points.decode_ceiling_tokens_per_s
    if ceiling is not None:
        # The batch is a mean of running requests: 3.5 shown as 4 would name another ceiling.
        size = f"{decode.batch:.1f}".removesuffix(".0")
        batch = f"B {size}" if compact else f"batch {size}"
        lines.append(f"  ceiling {rate_text(ceiling)} at {batch}")
    return lines


def _measured_lines(measured: MeasuredPoint | None, reason: str, compact: bool) -> list[str]:
    if measured is None:
        # No measured counters is the common case: only a stalled measurement is news.
        return [] if reason.endswith("missing") else [f"M — {reason}"]
    line = _point_line("M", measured, compact)
    ratio = measured.flops_ratio
    if ratio is not None:
        line += f" ×{ratio:.2g}" if compact else f" · ×{ratio:.2g} model"
    return [line]


def caption_lines(
    view: RooflineView | None, *, title: bool = True, compact: bool = False
) -> list[str]:
    """The pane's words: each point's FLOP/s, intensity and % of roof, the decode ceiling.

    `title` adds the roofs (ridge, peak); `compact` drops the filler words for narrow panes.
    """
    if view is None:
        return ["no hardware or model profile"]
    hw = view.hw
    roofs = f"ridge {intensity_text(hw.ridge)} · peak {si(hw.peak_flops, 'FLOP/s')}"
    lines = [roofs] if title else []
    points = view.points
    if points is None:
        return [*lines, "no live figures yet: roofs only"]
    prefill = points.prefill
    if prefill is None:
        lines.append(f"P — {points.prefill_reason}")
    else:
        lines.append(_point_line("P", prefill, compact))
    lines += _decode_lines(points, compact)
    lines += _measured_lines(points.measured, points.measured_reason, compact)
    if points.above_roof:
        lines.append(ABOVE_ROOF_COMPACT if compact else ABOVE_ROOF)
    return lines


def pane_title(view: RooflineView | None) -> str:
    return "Roofline" if view is None else f"Roofline · {view.hw.id} · {view.model.id}"


# --- the plot ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Axes:
    """Log10 ranges of the plot."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float


@dataclass(frozen=True, slots=True)
class Mark:
    """One point as plotted: its letter, and its spot on the grid of the spec."""

    letter: str
    colour: tuple[int, int, int]
    col: int
    row: int


@dataclass(frozen=True, slots=True)
class PlotSpec:
    """Everything the plot draws, points rounded to a grid twice as fine as the plot's cells:
    equal specs draw the same plot."""

    ridge: float
    peak: float
    bandwidth: float
    """log10 of the ridge intensity, the peak FLOP/s and the bandwidth."""
    axes: Axes
    grid: Size
    marks: tuple[Mark, ...]
    x_ticks: int
    x_label: str | None
    """The axis labels, when the pane is tall enough for them."""
    roof_colour: tuple[int, int, int]
    ridge_colour: tuple[int, int, int]

    def at(self, mark: Mark) -> tuple[float, float]:
        """A mark's log10 coordinates."""
        axes, grid = self.axes, self.grid
        x = axes.x_lo + (axes.x_hi - axes.x_lo) * mark.col / grid.width
        return x, axes.y_lo + (axes.y_hi - axes.y_lo) * mark.row / grid.height


def plot_layout(pane: Size) -> tuple[bool, int]:
    """What of the plot depends on the pane's size: axis labels, and how many x ticks fit."""
    return pane.height >= TITLE_MIN_HEIGHT, max(2, pane.width // 6)


def plot_spec(view: RooflineView, pane: Size, plot: Size, colours: dict[str, str]) -> PlotSpec:
    """The spec of `view` in a pane and plot of these sizes, in the theme's `colours`."""
    hw, plotted = view.hw, _plotted(view.points)
    axes = _axes(view, plotted)
    grid = Size(max(2 * plot.width, 1), max(2 * plot.height, 1))
    labels, x_ticks = plot_layout(pane)
    marks = tuple(
        Mark(
            LETTERS[name],
            _theme_rgb(colours, name),
            _spot(math.log10(point.intensity), axes.x_lo, axes.x_hi, grid.width),
            _spot(math.log10(point.achieved_flops_per_s), axes.y_lo, axes.y_hi, grid.height),
        )
        for name, point in plotted
    )
    return PlotSpec(
        math.log10(hw.ridge),
        math.log10(hw.peak_flops),
        math.log10(hw.bandwidth),
        axes,
        grid,
        marks,
        x_ticks,
        f"FLOP/byte (ridge {intensity_text(hw.ridge)})" if labels else None,
        _theme_rgb(colours, "roof"),
        _theme_rgb(colours, "ridge"),
    )


def _spot(value: float, lo: float, hi: float, steps: int) -> int:
    """`value`'s nearest step between `lo` and `hi` (kept inside: a mark is never cut off)."""
    return min(max(round((value - lo) / (hi - lo) * steps), 0), steps)


def _plotted(points: OperatingPoints | None) -> list[tuple[str, RoofPoint]]:
    if points is None:
        return []
    named: list[tuple[str, RoofPoint | None]] = [
        ("prefill", points.prefill),
        ("decode", points.decode),
        ("measured", points.measured),
    ]
    return [
        (name, point)
        for name, point in named
        if point is not None and math.isfinite(point.intensity) and point.flops > 0
    ]


def _axes(view: RooflineView, plotted: list[tuple[str, RoofPoint]]) -> Axes:
    hw = view.hw
    xs = [p.intensity for _, p in plotted] + [1.0, hw.ridge * 10]
    ys = [math.log10(p.achieved_flops_per_s) for _, p in plotted]
    x_lo = math.floor(math.log10(min(xs)))
    x_hi = math.ceil(math.log10(max(xs)))
    y_lo = min([math.log10(hw.bandwidth * 10.0**x_lo), *ys])
    return Axes(x_lo, x_hi, math.floor(y_lo), _y_top(math.log10(hw.peak_flops), ys))


def _y_top(peak: float, ys: list[float]) -> float:
    """Twice the peak, or higher to keep a point above its roof in sight (a wrong profile is
    shown as it is, not hidden). Rounded up to a half decade, so a point moving a little
    up there does not rescale the plot at every refresh."""
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


_COLOURS = {
    "roof": ("text-primary", "primary"),
    "ridge": ("foreground-darken-3", "foreground"),
    "prefill": ("text-warning", "warning"),
    "decode": ("text-success", "success"),
    "measured": ("text-secondary", "secondary"),
}
"""Theme variables each part is drawn in (the readable `text-*` shades first)."""


def _theme_rgb(variables: dict[str, str], part: str) -> tuple[int, int, int]:
    for name in _COLOURS[part]:
        if name in variables:
            rgb: tuple[int, int, int] = Color.parse(variables[name]).rgb
            return rgb
    return (255, 255, 255)


def draw_spec(plt: Plot, spec: PlotSpec) -> None:
    """Plot `spec` on a cleared plotext figure."""
    axes = spec.axes
    plt.plot(
        [axes.x_lo, spec.ridge, axes.x_hi],
        [spec.bandwidth + axes.x_lo, spec.peak, spec.peak],
        marker="braille",
        color=spec.roof_colour,
    )
    plt.vline(spec.ridge, spec.ridge_colour)
    for mark in spec.marks:  # after the roofs: a letter is drawn over them
        x, y = spec.at(mark)
        plt.scatter([x], [y], marker=mark.letter, color=mark.colour)
    plt.xlim(axes.x_lo, axes.x_hi)
    plt.ylim(axes.y_lo, axes.y_hi)
    plt.xticks(*_decade_ticks(axes.x_lo, axes.x_hi, room=spec.x_ticks))
    plt.yticks(*_decade_ticks(axes.y_lo, axes.y_hi, room=6))
    if spec.x_label is not None:
        plt.xlabel(spec.x_label)
        plt.ylabel("FLOP/s")


class RoofPlot(PlotextPlot):
    """The roofs and points, plotted again only when the spec at the current size changes."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # "clear" leaves background and text to the pane's styles, which follow the app
        # theme; the roofs and points take the theme's colours when plotted.
        self.theme = "clear"
        self.view: RooflineView | None = None
        self.plotted: PlotSpec | None = None
        """The spec plotext holds now."""

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.refresh())

    def show(self, view: RooflineView | None) -> None:
        self.view = view
        if self.spec() != self.plotted:
            self.refresh()

    def spec(self) -> PlotSpec | None:
        """The spec of the view at the pane's and plot's current sizes and theme."""
        if self.view is None:
            return None
        pane = self.parent.outer_size if isinstance(self.parent, Widget) else self.outer_size
        return plot_spec(self.view, pane, self.size, self.app.theme_variables)

    def render(self) -> RenderResult:
        spec = self.spec()
        if spec != self.plotted:
            self.plotted = spec
            self.plt.clear_data()
            self.plt.clear_figure()
            if spec is not None:
                draw_spec(self.plt, spec)
        return super().render()


def is_text_only(pane: Size) -> bool:
    """Too small a pane for a plot: the caption alone says it all."""
    return pane.width < MIN_PLOT_WIDTH or pane.height < MIN_PLOT_HEIGHT


def caption_at(view: RooflineView | None, pane: Size) -> list[str]:
    """The caption's lines in a pane of this (outer) size."""
    title = is_text_only(pane) or pane.height >= TITLE_MIN_HEIGHT
    return caption_lines(view, title=title, compact=pane.width < WIDE_CAPTION_WIDTH)


class Caption(Widget):
    """The words under the plot; the screen is laid out again only when their number changes."""

    lines: reactive[tuple[str, ...]] = reactive((), repaint=False, init=False)

    def watch_lines(self, old: tuple[str, ...], lines: tuple[str, ...]) -> None:
        self.refresh(layout=len(old) != len(lines))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.lines)

    def render(self) -> RenderResult:
        return Content("\n".join(self.lines))


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
    RooflinePane > #roofline-plot {
        height: 1fr;
    }
    RooflinePane > #roofline-caption {
        height: auto;
        color: $text-muted;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    RooflinePane.-text-only > #roofline-plot {
        display: none;
    }
    RooflinePane.-text-only > #roofline-caption {
        color: $foreground;
    }
    """

    view: reactive[RooflineView | None] = reactive(None, init=False, repaint=False)
    """What to draw; an equal view draws nothing. The pane is only a border: its plot and
    caption redraw themselves, and a new title repaints the border."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = Content(pane_title(None))
        self.plot = RoofPlot(id="roofline-plot")
        self.caption = Caption(id="roofline-caption")

    def compose(self) -> ComposeResult:
        yield self.plot
        yield self.caption

    def show(self, view: RooflineView | None) -> None:
        """Draw this view (a no-op when it equals the one on screen)."""
        self.view = view

    def watch_view(self, old: RooflineView | None, view: RooflineView | None) -> None:
        title = pane_title(view)
        if title != pane_title(old):
            self.border_title = Content(visible(title))
        self.draw()

    def on_resize(self, _event: Resize) -> None:
        self.set_class(is_text_only(self.outer_size), "-text-only")
        self.draw()

    @property
    def text_only(self) -> bool:
        return self.has_class("-text-only")

    def draw(self) -> None:
        """The caption and the plot of the view at the pane's size."""
        self.caption.lines = tuple(visible(line) for line in caption_at(self.view, self.outer_size))
        self.plot.show(self.view)
