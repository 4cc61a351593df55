"""The mini roofline pane: the roofs on log-log axes, the lane's points, and a caption.

It renders from a `RooflineView` only. The plot is rebuilt when a mark moves to another cell,
or the roofs, the axes, the size or the theme change; never on a plain repaint, and not when
live points only move within their cells.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from plotext._utility import ansi_end, colors_to_ansi, get_matrix_data
from rich.cells import cell_len
from rich.segment import Segment as RichSegment
from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.color import Color
from textual.content import Content
from textual.events import Resize
from textual.geometry import Region, Size
from textual.reactive import reactive
from textual.strip import Strip
from textual.style import Style
from textual.theme import Theme
from textual.visual import Visual, visualize
from textual.widget import Widget
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
    prefill: PrefillPoint | None = points.prefill
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
    ys = [math.log10(p.achieved_flops_per_s) for _, p in plotted]
    x_lo = math.floor(math.log10(min(xs)))
    x_hi = math.ceil(math.log10(max(xs)))
    y_lo = min([math.log10(hw.bandwidth * 10.0**x_lo), *ys])
    return _Axes(x_lo, x_hi, math.floor(y_lo), _y_top(math.log10(hw.peak_flops), ys))


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
"""Theme variables each mark is drawn in (the readable `text-*` shades first)."""


def _theme_rgb(variables: dict[str, str], mark: str) -> tuple[int, int, int]:
    for name in _COLOURS[mark]:
        if name in variables:
            rgb: tuple[int, int, int] = Color.parse(variables[name]).rgb
            return rgb
    return (255, 255, 255)


class _FrameDrawing:
    """The plot without its marks, as plotext drew it and as Textual shows it."""

    __slots__ = ("canvas", "cells", "key", "origin", "strips")

    def __init__(self, key: tuple[object, ...], matrix: Any, strips: list[Strip]) -> None:
        self.key = key
        self.cells: tuple[list[list[Any]], ...] = tuple(
            [list(row) for row in grid]
            for grid in (matrix.marker, matrix.fullground, matrix.style, matrix.background)
        )
        """plotext's marker, colour, style and background rows, bottom row first as it keeps
        them (see plotext's matrix_class)."""
        self.origin = (matrix.Cols_canvas.start, matrix.Rows_canvas.start)
        self.canvas = (len(matrix.Cols_canvas), len(matrix.Rows_canvas))
        self.strips = strips


def _row_ansi(markers: list[str], colors: list[list[Any]]) -> str:
    """One plot row as plotext's `matrix_class.set_canvas` writes it: a code where the
    colours change, the end code where they are about to."""
    out: list[str] = []
    last = len(markers) - 1
    for col, marker in enumerate(markers):
        if col == 0 or colors[col] != colors[col - 1]:
            out.append(colors_to_ansi(*colors[col]))
        out.append(marker)
        if col == last or colors[col] != colors[col + 1]:
            out.append(ansi_end)
    return "".join(out)


class _RoofPlot(PlotextPlot):
    """A PlotextPlot drawn from a `PlotSpec`: plotext draws the frame, the marks go on top.

    plotext draws the roofs, ridge, axes and labels once per frame, size and theme. The
    marks (one letter each) are put into a copy of plotext's own cells, in the cells its
    rule gives them, as plotext itself would put them last; only their rows are converted
    again. So live points cost a row or two when they move to another cell, and nothing
    when they stay in theirs. The spec's layout (axis labels, x ticks) follows the pane's
    size, read when the plot is drawn, so the first paint is already at the right layout.
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # "clear" leaves background and text to the pane's styles, which follow the app
        # theme; the roof and the points take the theme's colours when drawn.
        self.theme = "clear"
        self.builds = 0
        """plotext builds so far."""
        self._generation = 0
        """Frames drawn so far."""
        self.view: RooflineView | None = None
        self.spec: PlotSpec | None = None
        self._frame: _FrameDrawing | None = None
        self._rows: tuple[tuple[object, ...], dict[int, tuple[str, Strip]]] | None = None
        """(frame key, mark cells) -> the rows with marks: screen row -> (ansi, strip)."""
        self._text: tuple[tuple[object, ...], Text] | None = None
        self._spec_key: tuple[RooflineView | None, Size, PlotSpec | None] | None = None

    # --- what to draw ---------------------------------------------------------------------

    def show(self, view: RooflineView | None) -> None:
        """Draw `view`; repaint only the rows whose marks changed when the frame is the same."""
        self.view = view
        spec = self._spec_now()
        if spec == self.spec:
            return
        self.spec = spec
        frame = self._frame
        if frame is None or frame.key != self._frame_key():
            self.refresh()
            return
        before = self._rows[1] if self._rows is not None else {}
        after = self._mark_rows(frame)
        width = self.size.width
        changed = [
            y
            for y in before.keys() | after.keys()
            if (before.get(y) or ("",))[0] != (after.get(y) or ("",))[0]
        ]
        if changed:
            self.refresh(*(Region(0, y, width, 1) for y in sorted(changed)))

    def _spec_now(self) -> PlotSpec | None:
        """The spec of the view at the pane's current size (kept: each row drawn asks)."""
        view, pane = self.view, self._pane_size()
        kept = self._spec_key
        if kept is None or kept[0] is not view or kept[1] != pane:
            spec = plot_spec(view, *plot_layout(pane)) if view is not None else None
            kept = self._spec_key = (view, pane, spec)
        return kept[2]

    def _pane_size(self) -> Size:
        pane = self.parent
        return pane.outer_size if isinstance(pane, Widget) else self.outer_size

    def _frame_key(self) -> tuple[object, ...]:
        frame = self.spec.frame if self.spec is not None else None
        return (*self.size, self.app.theme, self.theme, self.visual_style, frame)

    # --- drawing ----------------------------------------------------------------------------

    def _plotext(self, spec: PlotSpec | None) -> str:
        """plotext's text of `spec` at the current size and theme, as PlotextPlot.render."""
        width, height = self.size.width, self.size.height
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        if spec is not None:
            _draw_spec(plt, spec, self.app.theme_variables)
        plt.plotsize(width, height)
        plt._set_size(width, height)
        plt.theme(self._get_plotext_theme_name(self.app.theme))
        text: str = plt.build()
        self.builds += 1
        return text

    def _current_frame(self) -> _FrameDrawing:
        spec = self._spec_now()
        if spec != self.spec:  # the pane's layout changed since `show`
            self.spec = spec
        key = self._frame_key()
        if self._frame is None or self._frame.key != key:
            bare = PlotSpec(spec.frame, ()) if spec is not None else None
            text = self._plotext(bare)
            width, height = self.size
            visual = visualize(self, Text.from_ansi(text))
            strips = Visual.to_strips(self, visual, width, height, self.visual_style)
            self._frame = _FrameDrawing(key, self.plt.monitor.matrix, strips)  # type: ignore[attr-defined]
            self._generation += 1
        return self._frame

    def _mark_rows(self, frame: _FrameDrawing) -> dict[int, tuple[str, Strip]]:
        """The rows that carry marks, with the marks put in as plotext puts them."""
        spec = self.spec
        cells = mark_cells(spec, *frame.canvas) if spec is not None else ()
        key = (frame.key, cells)
        if self._rows is not None and self._rows[0] == key:
            return self._rows[1]
        markers, colours, styles, backgrounds = frame.cells
        rows: dict[int, tuple[list[str], list[Any], list[Any]]] = {}
        monitor = self.plt.monitor  # type: ignore[attr-defined]  # untyped plotext
        theme = self.app.theme_variables
        col0, row0 = frame.origin
        width, height = frame.canvas
        for name, x, y in cells:
            if not (0 <= x < width and 0 <= y < height):
                continue  # as plotext's remove_outsiders
            row = row0 + y
            marker_row, colour_row, style_row = rows.setdefault(
                row, (list(markers[row]), list(colours[row]), list(styles[row]))
            )
            marker_row[col0 + x] = _LETTERS[name]
            colour_row[col0 + x] = monitor.check_color(_theme_rgb(theme, name))
            style = monitor.check_style(None)
            if style is not None:
                style_row[col0 + x] = style
        before = self._rows[1] if self._rows is not None and self._rows[0][0] == frame.key else {}
        drawn: dict[int, tuple[str, Strip]] = {}
        last = len(markers) - 1
        for row, (marker_row, colour_row, style_row) in rows.items():
            colors = [
                [colour, style, background]
                for colour, style, background in zip(
                    colour_row, style_row, backgrounds[row], strict=True
                )
            ]
            ansi = _row_ansi(marker_row, colors)
            kept = before.get(last - row)
            same = kept is not None and kept[0] == ansi
            drawn[last - row] = kept if same and kept is not None else (ansi, self._strip(ansi))
        self._rows = (key, drawn)
        return drawn

    def _strip(self, ansi: str) -> Strip:
        """One row of plotext's text as Textual draws it."""
        visual = visualize(self, Text.from_ansi(ansi))
        return Visual.to_strips(self, visual, self.size.width, 1, self.visual_style)[0]

    def render_line(self, y: int) -> Strip:
        """Row `y`: the frame's, or the row with its marks put in."""
        self._dirty_regions.clear()  # Textual's own render_line would convert the whole plot
        frame = self._current_frame()
        marked = self._mark_rows(frame).get(y)
        if marked is not None:
            return marked[1]
        if 0 <= y < len(frame.strips):
            return frame.strips[y]
        return Strip.blank(self.size.width, self.visual_style.rich_style)

    def render(self) -> RenderResult:
        """The whole plot as one text, marks and all (Textual draws it row by row)."""
        frame = self._current_frame()
        rows = self._mark_rows(frame)
        key = self._rows[0] if self._rows is not None else frame.key
        if self._text is None or self._text[0] != key:
            lines = frame_text_rows(frame)
            for y, (ansi, _) in rows.items():
                lines[y] = ansi
            self._text = (key, Text.from_ansi("\n".join(lines)))
        return self._text[1]


def frame_text_rows(frame: _FrameDrawing) -> list[str]:
    """The frame's rows as plotext writes them, top row first."""
    markers, colours, styles, backgrounds = frame.cells
    return [
        _row_ansi(
            markers[row],
            [list(c) for c in zip(colours[row], styles[row], backgrounds[row], strict=True)],
        )
        for row in reversed(range(len(markers)))
    ]


def plot_layout(pane: Size) -> tuple[bool, int]:
    """What of the plot depends on the pane's size: axis labels, and how many x ticks fit."""
    return pane.height >= TITLE_MIN_HEIGHT, max(2, pane.width // 6)


def is_text_only(pane: Size) -> bool:
    """Too small a pane for a plot: the caption alone says it all."""
    return pane.width < MIN_PLOT_WIDTH or pane.height < MIN_PLOT_HEIGHT


def caption_at(view: RooflineView | None, pane: Size) -> list[str]:
    """The caption's lines in a pane of this (outer) size."""
    title = is_text_only(pane) or pane.height >= TITLE_MIN_HEIGHT
    return caption_lines(view, title=title, compact=pane.width < WIDE_CAPTION_WIDTH)


class _Caption(Widget):
    """The words under the plot; how many lines depends on the pane's size, known at layout.

    Each line is drawn again only when its text (or the width, theme or style) changes: the
    numbers of one or two points move at a refresh, not the roofs line."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.view: RooflineView | None = None
        self._painted: list[str] = []
        """The lines of the last paint (or of the next, when already asked for)."""
        self._strips: dict[int, tuple[tuple[object, ...], Strip]] = {}
        self._lines_key: tuple[RooflineView | None, Size, list[str]] | None = None

    def _pane_size(self, content: Size | None = None) -> Size:
        pane = self.parent
        if not isinstance(pane, Widget):
            return self.outer_size
        if content is None:
            return pane.outer_size
        width, height = pane.styles.gutter.totals
        return Size(content.width + width, content.height + height)

    def show(self, view: RooflineView | None) -> None:
        self.view = view
        lines = caption_at(view, self._pane_size())
        painted = self._painted
        if lines == painted:
            return
        width = self.size.width
        if len(lines) != len(painted) or not width:
            # Only another number of lines needs the screen laid out again.
            self.refresh(layout=len(lines) != len(painted))
        else:
            changed = [y for y, (a, b) in enumerate(zip(painted, lines, strict=True)) if a != b]
            self.refresh(*(Region(0, y, width, 1) for y in changed))
        self._painted = lines

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(caption_at(self.view, self._pane_size(container)))

    def render(self) -> RenderResult:
        return Content("\n".join(self._current_lines()))

    def _current_lines(self) -> list[str]:
        view, pane = self.view, self._pane_size()
        kept = self._lines_key
        if kept is None or kept[0] is not view or kept[1] != pane:
            kept = self._lines_key = (view, pane, caption_at(view, pane))
            self._painted = kept[2]
        return kept[2]

    def render_line(self, y: int) -> Strip:
        self._dirty_regions.clear()  # Textual's own render_line would draw every line again
        lines = self._current_lines()
        width, style = self.size.width, self.visual_style
        if not 0 <= y < len(lines):
            return Strip.blank(width, style.rich_style)
        key = (lines[y], width, self.app.theme, style, self.text_selection)
        cached = self._strips.get(y)
        if cached is None or cached[0] != key:
            cached = self._strips[y] = (key, self._line_strip(lines[y], width, style))
        return cached[1]

    def _line_strip(self, line: str, width: int, style: Style) -> Strip:
        """The strip `Visual.to_strips` makes of the line; built directly when it fits (one
        segment in the widget's style, a tenth of the cost), else by Textual (cut with …)."""
        length = cell_len(line)
        if length <= width and self.text_selection is None:
            return Strip([RichSegment(line, style.rich_style_with_offset(0, 0))], length)
        strips = Visual.to_strips(self, Content(line), width, 1, style)
        return strips[0] if strips else Strip.blank(width)


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
        self._title = "Roofline"
        # Kept, not queried: a query at every refresh cost more than drawing the caption.
        self._plot = _RoofPlot(id="roofline-plot")
        self._caption = _Caption(id="roofline-caption")

    def compose(self) -> ComposeResult:
        yield self._plot
        yield self._caption

    def show(self, view: RooflineView | None) -> None:
        """Draw this view (a no-op when it equals the one on screen)."""
        self.view = view

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, self._on_theme_changed)
        self._draw()

    def watch_view(self, view: RooflineView | None) -> None:
        title = pane_title(view)
        if title != self._title:  # setting it repaints the whole pane, plot and all
            self._title = self.border_title = title
        if self.is_mounted:
            self._draw()

    def on_resize(self, _event: Resize) -> None:
        self.set_class(is_text_only(self.outer_size), "-text-only")
        self._draw()

    @property
    def text_only(self) -> bool:
        return self.has_class("-text-only")

    def _on_theme_changed(self, _theme: Theme) -> None:
        self._plot.refresh()

    def _draw(self) -> None:
        self._caption.show(self.view)
        self._plot.show(self.view)
