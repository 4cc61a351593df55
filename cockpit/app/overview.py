"""The overview: every lane of the fleet in one table, a row a lane, from one read per refresh.

The app reads the fleet while it is open and hands it each snapshot (`show`). `s`/`S` sort,
`/` filters by name, `c` picks the trend's column, `enter` opens the lane's panes (the app
answers the table's `Selected`), `e` exports the overview's receipt (the app's export).
"""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from cockpit.core.fleet import NUMERIC_COLUMNS, FleetRow, filter_rows, shown_columns
from cockpit.core.health import Thresholds
from cockpit.runtime.poller import FleetSnapshot
from cockpit.widgets.fleet import FleetOrder, fleet_status, next_key, ordered_rows, table_view
from cockpit.widgets.fleet_table import RowTable


class FleetScreen(Screen[None]):
    """The overview: a status line, the filter field (after `/`), the table, the keys."""

    DEFAULT_CSS = """
    FleetScreen #fleet-status { height: auto; padding: 0 1; background: $panel; }
    FleetScreen #fleet-filter { display: none; }
    FleetScreen.-filtering #fleet-filter { display: block; }
    FleetScreen RowTable { padding: 0 1; }
    """

    AUTO_FOCUS = "RowTable"
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "sort", "sort"),
        Binding("S", "reverse", "reverse", show=False),
        Binding("c", "trend", "trend", show=False),  # off the bar: 80 columns are full
        Binding("slash", "filter", "filter", key_display="/"),
        Binding("escape", "clear_filter", "clear filter", show=False),
        Binding("e", "app.export", "export"),
    ]

    def __init__(self, thresholds: Thresholds) -> None:
        super().__init__()
        self.thresholds = thresholds
        self.snapshot: FleetSnapshot | None = None
        """The fleet's last read (the app's), as shown."""
        self.order = FleetOrder()
        self.window = ""
        self.paused = False
        self.status_lines = 0
        """The status's lines as last drawn when each fit its width (0: unknown)."""

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-status", markup=False)
        yield Input(placeholder="lanes whose name contains…", id="fleet-filter")
        yield RowTable(id="fleet-table")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _: self.redraw())
        self.redraw()

    def show(self, window: str, paused: bool) -> None:
        """Draw the fleet's snapshot (None: not read yet), the app's window and pause."""
        self.window, self.paused = window, paused
        if self.is_mounted:
            self.redraw()

    def rows(self) -> list[FleetRow]:
        """Every row, in the screen's order (the filter aside)."""
        return ordered_rows(self.snapshot, self.order)

    def redraw(self) -> None:
        snapshot, order = self.snapshot, self.order
        self.show_status(fleet_status(snapshot, order, self.window, self.paused))
        rows = filter_rows(self.rows(), order.filter)
        stale = snapshot is not None and snapshot.freshness.state != "ok"
        self.query_one(RowTable).show(table_view(rows, order, self.thresholds, stale))

    def show_status(self, status: Content) -> None:
        """The status line, laid out again only when its height may change: a new clock each
        refresh is not a new layout of the screen."""
        widget = self.query_one("#fleet-status", Static)
        lines = status.split("\n")
        fits = all(line.cell_length <= widget.content_size.width for line in lines)
        layout = not fits or len(lines) != self.status_lines
        self.status_lines = len(lines) if fits else 0
        widget.update(status, layout=layout)

    # --- keys ---------------------------------------------------------------------------------

    def action_sort(self) -> None:
        keys = [column.key for column in shown_columns(self.rows())]
        self.order.sort = next_key(keys, self.order.sort)
        self.redraw()

    def action_reverse(self) -> None:
        self.order.reverse = not self.order.reverse
        self.redraw()

    def action_trend(self) -> None:
        self.order.trend = next_key(NUMERIC_COLUMNS, self.order.trend)
        self.redraw()

    def action_filter(self) -> None:
        self.add_class("-filtering")
        self.query_one(Input).focus()

    @on(Input.Changed)
    def _filter_changed(self, event: Input.Changed) -> None:
        self.order.filter = event.value
        self.redraw()

    @on(Input.Submitted)
    def _filter_done(self) -> None:
        self.query_one(RowTable).focus()

    def action_clear_filter(self) -> None:
        self.query_one(Input).value = ""  # the field's change clears the filter
        self.remove_class("-filtering")
        self.query_one(RowTable).focus()
