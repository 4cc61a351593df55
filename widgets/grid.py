"""The panes' grid: rows one cell tall, each pane spanning as many as it is high, so a column
is its panes stacked with no gap under a short one."""

from __future__ import annotations

from textual.containers import Grid
from textual.layout import Layout


class PaneGrid(Grid):
    """As many rows as its longest column needs."""

    def pre_layout(self, layout: Layout) -> None:
        # Textual's grid counts rows up to the last pane's first row only: it would cut the
        # panes that reach lower. Place the panes as it does (each in the first free cells,
        # reading across) to know where the longest column ends.
        columns = max(1, self.styles.grid_size_columns)
        taken: set[tuple[int, int]] = set()
        slot = bottom = 0
        for child in self.displayed_children:
            width, height = child.styles.column_span or 1, child.styles.row_span or 1
            while True:
                column, row = divmod(slot, columns)[::-1]
                cells = {(column + x, row + y) for x in range(width) for y in range(height)}
                if taken.isdisjoint(cells):
                    break
                slot += 1
            taken |= cells
            bottom = max(bottom, row + height)
            slot += 1
        self.styles.grid_size_rows = bottom
