"""A table drawn as one `Content` (no per-cell renderables: 100 lanes redraw in a few ms): a
header, the rows that fit, a row cursor, a fixed first column; plain-text cells, a style each,
asked only of the rows drawn."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from textual import events
from textual.binding import Binding, BindingType
from textual.content import Content, Span
from textual.message import Message
from textual.widget import Widget


def unstyled(number: int) -> tuple[str, ...]:
    return ()


@dataclass(frozen=True, slots=True)
class TableView:
    """What the table shows: titles, which columns are right-aligned, keys, each row's cell
    texts and its style; `cell_styles(n)` is row n's cells' styles ("" for none), worked out
    only for the rows on screen."""

    titles: tuple[str, ...] = ()
    right: tuple[bool, ...] = ()
    keys: tuple[str, ...] = ()
    texts: tuple[tuple[str, ...], ...] = ()
    row_styles: tuple[str, ...] = ()
    cell_styles: Callable[[int], tuple[str, ...]] = unstyled


def cells(text: str) -> int:
    """The terminal cells `text` takes (printable ASCII: a cell a character, not looked up)."""
    return len(text) if text.isascii() and text.isprintable() else cell_len(text)


def column_widths(view: TableView) -> list[int]:
    columns = zip(view.titles, *view.texts, strict=True)
    return [max(map(cells, column)) for column in columns]


def fit(text: str, width: int, right: bool) -> str:
    """`text` padded to `width` cells, at the left when `right`."""
    pad = " " * max(width - cells(text), 0)
    return pad + text if right else text + pad


class RowTable(Widget, can_focus=True):
    """A `TableView`'s rows, a cursor (enter posts `Selected`); left/right shift the columns."""

    DEFAULT_CSS = "RowTable { height: 1fr; }"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(-1)", "up", show=False),
        Binding("down", "move(1)", "down", show=False),
        Binding("pageup", "page(-1)", "page up", show=False),
        Binding("pagedown", "page(1)", "page down", show=False),
        Binding("home", "move(-1000000)", "first", show=False),
        Binding("end", "move(1000000)", "last", show=False),
        Binding("left", "shift(-1)", "columns left", show=False),
        Binding("right", "shift(1)", "columns right", show=False),
        Binding("enter", "select", "open"),
    ]

    @dataclass
    class Selected(Message):
        """Enter (or a click on the cursor's row) on the row with this key."""

        key: str

    view = TableView()
    widths: Sequence[int] = ()
    cursor = top = 0
    shift = 0
    """Columns after the first left out at the left (they didn't all fit)."""

    @property
    def cursor_key(self) -> str | None:
        keys = self.view.keys
        return keys[self.cursor] if 0 <= self.cursor < len(keys) else None

    def show(self, view: TableView) -> None:
        """Draw `view`, the cursor staying on its row's key (or its place) when it moved; not
        drawn again when it would draw as the last did."""
        key, cursor, last = self.cursor_key, self.cursor, self.view
        self.view, self.widths = view, column_widths(view)
        if key in view.keys:
            self.cursor = view.keys.index(key)
        self.cursor = max(min(self.cursor, len(view.keys) - 1), 0)
        if self.cursor != cursor or not self.draws_alike(last, view):
            self.refresh()

    def draws_alike(self, last: TableView, view: TableView) -> bool:
        """Do the two views draw the same: their cells, and the styles of the rows on screen?"""
        if (last.titles, last.right, last.keys, last.texts, last.row_styles) != (
            view.titles, view.right, view.keys, view.texts, view.row_styles
        ):  # fmt: skip
            return False
        on_screen = range(self.top, min(self.top + self.size.height, len(view.texts)))
        return all(last.cell_styles(number) == view.cell_styles(number) for number in on_screen)

    def columns(self, width: int) -> list[int]:
        """The first column, then as many of the others (from the shift on) as fit."""
        shown, used = [0], self.widths[0] if self.widths else 0
        for index in range(1 + self.shift, len(self.widths)):
            used += 2 + self.widths[index]
            if used > width and len(shown) > 1:
                break
            shown.append(index)
        return shown

    def _line(
        self,
        texts: Sequence[str],
        styles: Sequence[str],
        shown: list[int],
        at: int,
        spans: list[Span],
        style: str = "",
    ) -> str:
        """The shown cells of a line starting at offset `at` of the table's text; their spans
        (the line's `style` under its cells') added to `spans`."""
        start, pieces, cell_spans = at, list[str](), list[Span]()
        for i in shown:
            piece = fit(texts[i], self.widths[i], self.view.right[i])
            if styles and styles[i]:
                cell_spans.append(Span(at, at + len(piece), styles[i]))
            pieces.append(piece)
            at += len(piece) + 2
        line = "  ".join(pieces)
        if style:
            spans.append(Span(start, start + len(line), style))
        spans += cell_spans
        return line

    def render(self) -> Content:
        view = self.view
        if not view.titles:
            return Content("")
        height, width = max(self.size.height - 1, 1), self.size.width
        self.top = min(max(self.top, self.cursor - height + 1), self.cursor)
        shown = self.columns(width)
        spans: list[Span] = []
        header = self._line(view.titles, ("bold",) * len(view.titles), shown, 0, spans)
        hidden = ("←" if self.shift else "") + ("→" if shown[-1] < len(self.widths) - 1 else "")
        if hidden:
            spans.append(Span(len(header), len(header) + len(hidden) + 1, "$accent"))
            header += f" {hidden}"
        lines, at = [header], len(header) + 1
        for number in range(self.top, min(self.top + height, len(view.texts))):
            style = view.row_styles[number]
            if number == self.cursor:
                cursor = "reverse" if self.has_focus else "underline"
                style = f"{style} {cursor}".strip()
            line = self._line(view.texts[number], view.cell_styles(number), shown, at, spans, style)
            lines.append(line)
            at += len(line) + 1
        return Content("\n".join(lines), spans)

    def action_move(self, step: int) -> None:
        self.cursor = max(min(self.cursor + step, len(self.view.keys) - 1), 0)
        self.refresh()

    def action_page(self, step: int) -> None:
        self.action_move(step * max(self.size.height - 2, 1))

    def action_shift(self, step: int) -> None:
        """Show the columns further right (`step` 1), or back left; not past the last."""
        if step > 0 and self.columns(self.size.width)[-1] >= len(self.widths) - 1:
            return
        self.shift = max(self.shift + step, 0)
        self.refresh()

    def action_select(self) -> None:
        key = self.cursor_key
        if key is not None:
            self.post_message(self.Selected(key))

    def on_click(self, event: events.Click) -> None:
        number = self.top + event.y - 1
        if event.y >= 1 and 0 <= number < len(self.view.keys):
            if number == self.cursor:
                self.action_select()
            self.cursor = number
            self.refresh()

    def on_mouse_scroll_down(self) -> None:
        self.action_move(3)

    def on_mouse_scroll_up(self) -> None:
        self.action_move(-3)
