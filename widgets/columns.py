"""Panes in columns, each placed under the shortest column so no pane waits below a gap.

A grid of rows leaves a short pane's cell empty down to the tallest pane of its row; here
the prefill-first order is kept reading down-then-across, and a pane whose CSS height is in
`fr` (the roofline) takes the rest of the visible height in its column, between its
min-height and max-height. The number of columns and the gap come from the container's
`grid-size` and `grid-gutter`, so breakpoints stay in TCSS.
"""

from __future__ import annotations

from fractions import Fraction

from textual.css.scalar import Scalar
from textual.geometry import NULL_OFFSET, NULL_SPACING, Region, Size
from textual.layout import ArrangeResult, Layout, WidgetPlacement
from textual.widget import Widget


def column_widths(width: int, columns: int, gap: int) -> list[int]:
    """`columns` widths that, with `gap` between them, fill `width` (leftmost ones wider)."""
    room = max(width - gap * (columns - 1), columns)
    base, extra = divmod(room, columns)
    return [base + (1 if index < extra else 0) for index in range(columns)]


def fill_height(room: int, visible: int, low: int, high: int | None) -> int:
    """A filling pane's height: the room left in its column, else half the visible height."""
    height = room if room >= low else max(low, visible // 2)
    return min(height, high) if high is not None else height


class ColumnsLayout(Layout):
    """Shortest-column-first placement in `grid-size` columns."""

    name = "pane-columns"

    def arrange(
        self, parent: Widget, children: list[Widget], size: Size, greedy: bool = True
    ) -> ArrangeResult:
        parent.pre_layout(self)
        styles = parent.styles
        columns = max(1, styles.grid_size_columns or 1)
        # As in Textual's grid, `grid-gutter: 0 1` puts one cell between columns.
        gap = styles.grid_gutter_vertical
        widths = column_widths(size.width, columns, gap)
        lefts = [sum(widths[:index]) + gap * index for index in range(columns)]
        tops = [0] * columns
        visible = _visible_height(parent, size)
        viewport = parent.app.viewport_size
        placements: list[WidgetPlacement] = []
        for child in children:
            column = tops.index(min(tops))
            height = _height(child, widths[column], visible - tops[column], visible, viewport)
            region = Region(lefts[column], tops[column], widths[column], height)
            placements.append(WidgetPlacement(region, NULL_OFFSET, NULL_SPACING, child))
            tops[column] += height
        return placements

    def get_content_height(
        self, widget: Widget, container: Size, viewport: Size, width: int
    ) -> int:
        placements = self.arrange(widget, list(widget.displayed_children), Size(width, 0))
        return max((placement.region.bottom for placement in placements), default=0)


def _visible_height(parent: Widget, size: Size) -> int:
    """The height the user sees the panes in: the scrolling body's, else the container's."""
    body = parent.parent
    if isinstance(body, Widget) and body.size.height:
        return body.scrollable_content_region.height
    return size.height


def _height(child: Widget, width: int, room: int, visible: int, viewport: Size) -> int:
    styles = child.styles
    container = Size(width, max(visible, 1))
    if styles.height is not None and styles.height.is_fraction:
        low = _limit(child, styles.min_height, container, viewport) or 1
        high = _limit(child, styles.max_height, container, viewport)
        return fill_height(room, visible, low, high)
    box = child._get_box_model(container, viewport, Fraction(width), Fraction(visible))
    return int(box.height)


def _limit(child: Widget, scalar: Scalar | None, container: Size, viewport: Size) -> int | None:
    if scalar is None:
        return None
    return int(scalar.resolve(container, viewport))


class PaneColumns(Widget):
    """The container of the cockpit's panes (see the module docstring)."""

    DEFAULT_CSS = """
    PaneColumns {
        height: auto;
        grid-size: 2;
        grid-gutter: 0 1;
    }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        # Used whenever no `layout:` rule applies, so keep TCSS from setting one here.
        self._default_layout = ColumnsLayout()  # type: ignore[assignment]  # typed too narrowly
