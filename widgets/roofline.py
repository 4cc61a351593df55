"""The mini roofline pane: the roofs on log-log axes, the lane's points, and a caption.

It renders from a `RooflineView` only. The plot is rebuilt when a mark moves to another cell,
or the roofs, the axes, the size or the theme change; never on a plain repaint, and not when
live points only move within their cells.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from plotext._utility import get_matrix_data
from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.color import Color
from textual.events import Resize
from textual.reactive import reactive
from textual.theme import Theme
from textual.widget import Widget
from textual.widgets import Static
from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from cockpit.roofline import (
    Hardware,
    MeasuredPoint,
    OperatingPoints,
    PrefillPoint,
    RooflineView,
    RoofPoint,
)
from cockpit.roofline_table import intensity_text, rate_text, si

__all__ = ["RooflinePane", "RooflineView", "caption_lines"]

MIN_PLOT_WIDTH = 32
MIN_PLOT_HEIGHT = 12
TITLE_MIN_HEIGHT = 20
"""Below this height the plot keeps the rows: no roofs line in the caption, no axis labels."""
WIDE_CAPTION_WIDTH = 56

_LETTERS = {"prefill": "P", "decode": "D", "measured": "M"}


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
        batch = f"B {decode.batch:.0f}" if compact else f"batch {decode.batch:.0f}"
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
    prefill: PrefillPoint | None = points.prefill
    if prefill is None:
        lines.append(f"P — {points.prefill_reason}")
    else:
        lines.append(_point_line("P", prefill, compact))
    lines += _decode_lines(points, compact)
    lines += _measured_lines(points.measured, points.measured_reason, compact)
    return lines


def pane_title(view: RooflineView | None) -> str:
    return "Roofline" if view is None else f"Roofline · {view.hw.id} · {view.model.id}"


# --- the plot ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Axes:
    """Log10 ranges of the plot."""

    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float


@dataclass(frozen=True, slots=True)
class _Frame:
    """What the plot draws apart from the points: the roofs, the axes, their ticks and labels."""

    hw: Hardware
    axes: _Axes
    labels: bool
    x_ticks: int


@dataclass(frozen=True, slots=True)
class _Mark:
    """One point as plotted: its letter's name and log10 coordinates."""

    name: str
    x: float
    y: float


@dataclass(frozen=True, slots=True)
class PlotSpec:
    """Everything the plot shows, the theme's colours and the size aside."""

    frame: _Frame
    marks: tuple[_Mark, ...]


def plot_spec(view: RooflineView, labels: bool, x_ticks: int) -> PlotSpec:
    plotted = _plotted(view.points)
    marks = tuple(
        _Mark(name, math.log10(point.intensity), math.log10(point.achieved_flops_per_s))
        for name, point in plotted
    )
    return PlotSpec(_Frame(view.hw, _axes(view, plotted), labels, x_ticks), marks)


def mark_cells(spec: PlotSpec, width: int, height: int) -> tuple[tuple[str, int, int], ...]:
    """The canvas cell of every mark, by plotext's own rule for a canvas of this size."""
    axes = spec.frame.axes
    xs = get_matrix_data([mark.x for mark in spec.marks], [axes.x_lo, axes.x_hi], width)
    ys = get_matrix_data([mark.y for mark in spec.marks], [axes.y_lo, axes.y_hi], height)
    return tuple((mark.name, x, y) for mark, x, y in zip(spec.marks, xs, ys, strict=True))


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


def _axes(view: RooflineView, plotted: list[tuple[str, RoofPoint]]) -> _Axes:
    hw = view.hw
    xs = [p.intensity for _, p in plotted] + [1.0, hw.ridge * 10]
    ys = [p.achieved_flops_per_s for _, p in plotted]
    x_lo = math.floor(math.log10(min(xs)))
    x_hi = math.ceil(math.log10(max(xs)))
    y_lo = min([math.log10(hw.bandwidth * 10.0**x_lo), *(math.log10(y) for y in ys)])
    return _Axes(x_lo, x_hi, math.floor(y_lo), math.log10(hw.peak_flops) + 0.3)


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
"""Theme variables each mark is drawn in (the readable `text-*` shades first)."""


def _theme_rgb(variables: dict[str, str], mark: str) -> tuple[int, int, int]:
    for name in _COLOURS[mark]:
        if name in variables:
            rgb: tuple[int, int, int] = Color.parse(variables[name]).rgb
            return rgb
    return (255, 255, 255)


class _RoofPlot(PlotextPlot):
    """A PlotextPlot drawn from a `PlotSpec`, rebuilt only when its text can change.

    A new spec whose marks all stay in the cells they are drawn in, with the same frame, size
    and theme, plots to the same text: it is kept (for the next build) and nothing else is
    done. Otherwise it is built at once and compared with the text on screen, so the text's
    conversion and the screen update are skipped when it plots the same all the same.
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # "clear" leaves background and text to the pane's styles, which follow the app
        # theme; the roof and the points take the theme's colours when drawn.
        self.theme = "clear"
        self.builds = 0
        """plotext builds so far."""
        self.spec: PlotSpec | None = None
        self._generation = 0
        self._cache_key: tuple[object, ...] | None = None
        self._cached: RenderResult | None = None
        self._built: tuple[tuple[object, ...], str] | None = None
        """(size, themes, generation) -> the plotext text built for them."""
        self._canvas: tuple[int, int] = (0, 0)
        """The data area (columns, rows) of the last build."""
        self._drawn: tuple[object, ...] | None = None
        """What the last build drew: `_cells_key` of its spec."""

    def _base_key(self) -> tuple[object, ...]:
        return (self.size.width, self.size.height, self.app.theme, self.theme)

    def _key(self) -> tuple[object, ...]:
        return (*self._base_key(), self._generation)

    def _cells_key(self, spec: PlotSpec | None) -> tuple[object, ...]:
        if spec is None:
            return (*self._base_key(), None)
        cells = mark_cells(spec, *self._canvas)
        return (*self._base_key(), self._canvas, spec.frame, cells)

    def show(self, spec: PlotSpec | None) -> None:
        """Draw `spec`: a no-op when every mark stays in its cell (and frame, size, theme)."""
        if spec == self.spec:
            return
        same_text = self._drawn is not None and self._cells_key(spec) == self._drawn
        self.spec = spec
        if not same_text:
            self.replotted()

    def _build(self) -> str:
        """The plot's text at the current size and theme, as PlotextPlot.render builds it."""
        width, height = self.size.width, self.size.height
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        if self.spec is not None:
            _draw_spec(plt, self.spec, self.app.theme_variables)
        plt.plotsize(width, height)
        plt._set_size(width, height)
        plt.theme(self._get_plotext_theme_name(self.app.theme))
        text: str = plt.build()
        self.builds += 1
        matrix = plt.monitor.matrix  # type: ignore[attr-defined]  # untyped plotext
        self._canvas = (len(matrix.Cols_canvas), len(matrix.Rows_canvas))
        self._drawn = self._cells_key(self.spec)
        self._built = (self._key(), text)
        return text

    def replotted(self) -> None:
        """The spec or the theme changed: redraw unless it plots to the same text."""
        before = self._built
        if self.size.area and before is not None and before[0] == self._key():
            text = self._build()
            if text == before[1]:
                return
            self._generation += 1
            self._built = (self._key(), text)
        else:
            self._generation += 1
        self.refresh()

    def render(self) -> RenderResult:
        key = self._key()
        if self._cached is None or key != self._cache_key:
            built = self._built
            text = built[1] if built is not None and built[0] == key else self._build()
            self._cached = Text.from_ansi(text)
            self._cache_key = key
        return self._cached


def _draw_spec(plt: Plot, spec: PlotSpec, colours: dict[str, str]) -> None:
    frame, axes = spec.frame, spec.frame.axes
    hw = frame.hw
    ridge_x = math.log10(hw.ridge)
    peak_y = math.log10(hw.peak_flops)
    plt.plot(
        [axes.x_lo, ridge_x, axes.x_hi],
        [math.log10(hw.bandwidth) + axes.x_lo, peak_y, peak_y],
        marker="braille",
        color=_theme_rgb(colours, "roof"),
    )
    plt.vline(ridge_x, _theme_rgb(colours, "ridge"))
    for mark in spec.marks:
        plt.scatter(
            [mark.x], [mark.y], marker=_LETTERS[mark.name], color=_theme_rgb(colours, mark.name)
        )
    plt.xlim(axes.x_lo, axes.x_hi)
    plt.ylim(axes.y_lo, axes.y_hi)
    xticks, xlabels = _decade_ticks(axes.x_lo, axes.x_hi, room=frame.x_ticks)
    plt.xticks(xticks, xlabels)
    yticks, ylabels = _decade_ticks(axes.y_lo, axes.y_hi, room=6)
    plt.yticks(yticks, ylabels)
    if frame.labels:
        plt.xlabel(f"FLOP/byte (ridge {intensity_text(hw.ridge)})")
        plt.ylabel("FLOP/s")


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
    """What to draw; equal views don't redraw. The pane itself is only a border: its plot and
    caption redraw themselves, and a new title repaints the border."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = "Roofline"
        self._drawn_layout: tuple[bool, int] | None = None
        self._caption_height = -1
        self._caption_lines: list[str] = []
        self._title = "Roofline"

    def compose(self) -> ComposeResult:
        yield _RoofPlot(id="roofline-plot")
        yield Static(id="roofline-caption", markup=False)

    def show(self, view: RooflineView | None) -> None:
        """Draw this view (a no-op when it equals the one on screen)."""
        self.view = view

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, self._on_theme_changed)
        self._update_caption()
        self._draw_plot()

    def watch_view(self, view: RooflineView | None) -> None:
        title = pane_title(view)
        if title != self._title:  # setting it repaints the whole pane, plot and all
            self._title = self.border_title = title
        if self.is_mounted:
            self._update_caption()
            self._draw_plot()

    def on_resize(self, _event: Resize) -> None:
        outer = self.outer_size
        small = outer.width < MIN_PLOT_WIDTH or outer.height < MIN_PLOT_HEIGHT
        self.set_class(small, "-text-only")
        self._update_caption()
        if self._plot_layout() != self._drawn_layout:
            self._draw_plot()

    def _plot_layout(self) -> tuple[bool, int]:
        """What of the plot depends on the size: axis labels, and how many x ticks fit."""
        outer = self.outer_size
        return outer.height >= TITLE_MIN_HEIGHT, max(2, outer.width // 6)

    @property
    def text_only(self) -> bool:
        return self.has_class("-text-only")

    def _on_theme_changed(self, _theme: Theme) -> None:
        self._draw_plot()

    def _update_caption(self) -> None:
        outer = self.outer_size
        title = self.text_only or outer.height >= TITLE_MIN_HEIGHT
        compact = outer.width < WIDE_CAPTION_WIDTH
        lines = caption_lines(self.view, title=title, compact=compact)
        # Only another number of lines needs the screen laid out again; else a repaint.
        relayout = len(lines) != self._caption_height
        if not relayout and lines == self._caption_lines:
            return  # the same text: Static.update would render and repaint it all the same
        self._caption_height = len(lines)
        self._caption_lines = lines
        caption = self.query_one("#roofline-caption", Static)
        caption.update(Text("\n".join(lines)), layout=relayout)

    def _draw_plot(self) -> None:
        view = self.view
        layout = self._drawn_layout = self._plot_layout()
        spec = plot_spec(view, *layout) if view is not None else None
        self.query_one(_RoofPlot).show(spec)
