"""The overview: every lane of the fleet in one table, a row a lane, from one read per refresh.

While open it polls the fleet instead of the lane (one exclusive worker per cycle). `s`/`S`
sort, `/` filters by name, `c` picks the trend's column, `enter` opens the lane's panes.
Colours are the lane panes' health rules. Lane names are data: never markup.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import takewhile
from pathlib import Path
from typing import ClassVar, Protocol

from rich.cells import cell_len
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, Static
from textual.worker import Worker, WorkerState

from cockpit.core.figures import LaneFigures
from cockpit.core.fleet import (
    COLUMN_BY_KEY,
    DEFAULT_TREND,
    FIGURE_COLUMNS,
    FLEET_COLUMNS,
    LANE,
    NUMERIC_COLUMNS,
    TREND,
    UP,
    FleetColumn,
    FleetRow,
    filter_rows,
    format_cell,
    sort_rows,
)
from cockpit.core.health import Thresholds, check
from cockpit.core.model import Figure, frozen_map
from cockpit.core.snapshot import LaneSnapshot
from cockpit.core.text import visible
from cockpit.core.timeutil import clock
from cockpit.runtime.fleet_poller import FleetPoller, FleetSnapshot, write_fleet_receipt
from cockpit.runtime.poller import MAX_DELAY_S
from cockpit.runtime.receipts import receipt_name

from .fleet_table import Cell, RowTable, TableView
from .pane import TONE_STYLE, freshness_note, sparkline

TREND_CELLS = 12  # refreshes the trend column draws, a character each (newest at the right)


class FleetHost(Protocol):
    """What the overview asks of the app: the window, pause, to open a lane's panes (polling
    it alone), feeds for the lanes the fleet found, and a word when a fleet read is shown."""

    window: str
    paused: bool

    def open_lane(self, name: str) -> None: ...

    def add_lanes(self, names: Sequence[str]) -> None: ...

    def fleet_shown(self) -> None: ...


@dataclass
class FleetOrder:
    """How the overview shows the rows: sort column and direction, filter, trend column."""

    sort: str = LANE
    reverse: bool = False
    filter: str = ""
    trend: str = DEFAULT_TREND


def next_key(keys: Sequence[str], current: str, step: int = 1) -> str:
    return keys[(keys.index(current) + step) % len(keys)] if current in keys else keys[0]


def waiting_streak(row: FleetRow) -> int:
    """Refreshes in a row, up to the last, that found requests waiting (the queue rule)."""
    return sum(1 for _ in takewhile(bool, reversed(row.history("waiting_now"))))


def row_tones(row: FleetRow, thresholds: Thresholds) -> dict[str, str]:
    """Column key -> `good`/`warn`/`bad` by the lane panes' health rules; a down engine `bad`."""
    if row.gone or row.up is None:
        return {}
    if row.up is False:
        return {UP: "bad"}
    figures = {
        key: Figure(key, key, row.values.get(key), unit, above=key in row.above)
        for key in FIGURE_COLUMNS
        if (unit := COLUMN_BY_KEY[key].unit) is not None
    }
    panes = LaneFigures(frozen_map(figures))
    lane = LaneSnapshot(row.lane, "", None, panes, None, None, waiting_streak=waiting_streak(row))
    tones = {finding.figure_key: str(finding.severity) for finding in check(lane, thresholds)}
    return {UP: "good", **tones}


def cell_text(row: FleetRow, column: FleetColumn, trend: str) -> str:
    """A cell as the panes format its figure, DOWN for a down engine, the trend a sparkline."""
    if column.key == TREND:
        points = row.history(trend)[-TREND_CELLS:]
        return sparkline(tuple(points), len(points)).rjust(TREND_CELLS)
    if column.key == UP and row.up is False and not row.gone:
        return "DOWN"
    if column.key == LANE:
        return cut(visible(row.lane), LANE_CELLS)
    return visible(format_cell(row, column))


LANE_CELLS = 40
"""The widest the Lane column gets: a longer name ends in `…` (whole in the lane's panes)."""


def cut(text: str, cells: int) -> str:
    """`text` in at most `cells` terminal cells, ending in `…` when it was longer."""
    return text if cell_len(text) <= cells else Content(text).truncate(cells, ellipsis=True).plain


def table_view(
    rows: Sequence[FleetRow], order: FleetOrder, thresholds: Thresholds, stale: bool
) -> TableView:
    """The rows as the table draws them, gone lanes (and a stale fleet) dimmed."""
    arrow = " ▼" if order.reverse else " ▲"
    titles = tuple(
        (f"Trend {COLUMN_BY_KEY[order.trend].title}" if c.key == TREND else c.title)
        + (arrow if c.key == order.sort else "")
        for c in FLEET_COLUMNS
    )
    cells: list[tuple[Cell, ...]] = []
    for row in rows:
        tones = {LANE: "bold", **{k: TONE_STYLE[t] for k, t in row_tones(row, thresholds).items()}}
        cells.append(
            tuple((cell_text(row, c, order.trend), tones.get(c.key, "")) for c in FLEET_COLUMNS)
        )
    return TableView(
        titles,
        tuple(column.unit is not None for column in FLEET_COLUMNS),
        tuple(row.lane for row in rows),
        tuple(cells),
        tuple("dim" if row.gone or stale else "" for row in rows),
    )


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
        Binding("s", "sort(1)", "sort"),
        Binding("S", "reverse", "reverse", show=False),
        Binding("c", "trend(1)", "trend", show=False),  # off the bar: 80 columns are full
        Binding("slash", "filter", "filter", key_display="/"),
        Binding("escape", "clear_filter", "clear filter", show=False),
        Binding("e", "export", "export"),
    ]

    def __init__(
        self,
        poller: FleetPoller,
        host: FleetHost,
        thresholds: Thresholds,
        folder: Path,
        wall: Callable[[], float],
    ) -> None:
        super().__init__()
        self.poller = poller
        self.host = host
        self.thresholds = thresholds
        self.folder = folder  # where `e` writes the overview's receipt
        self.wall = wall
        self.snapshot: FleetSnapshot | None = None
        self.order = FleetOrder()
        self.epoch = 0
        self.timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="fleet-status", markup=False)
        yield Input(placeholder="lanes whose name contains…", id="fleet-filter")
        yield RowTable(id="fleet-table")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.app.theme_changed_signal.subscribe(self, lambda _: self.show())
        self.show()

    # --- polling ------------------------------------------------------------------------------

    @property
    def polling(self) -> bool:
        """The overview is open (under the help, say) and polling is not paused."""
        return self in self.app.screen_stack and not self.host.paused

    def read_now(self) -> None:
        """Start a fleet cycle now; one still out is cancelled and its answer dropped."""
        if self.timer is not None:
            self.timer.stop()
            self.timer = None
        self.epoch += 1
        epoch, window, poller = self.epoch, self.host.window, self.poller

        async def cycle() -> None:
            snapshot = await poller.cycle(window)
            self.call_next(self._read, snapshot, epoch)  # drawn outside the worker

        description = f"read the fleet over {window}"
        self.run_worker(
            cycle(), group="fleet", description=description, exclusive=True, exit_on_error=False
        )

    def _due(self) -> None:
        self.timer = None
        if self.polling:
            self.read_now()
        else:
            self.show()  # says paused

    def _read(self, snapshot: FleetSnapshot, epoch: int) -> None:
        if epoch != self.epoch:  # a newer cycle was started: this answer is dropped
            return
        self.snapshot = snapshot
        if snapshot.view is not None:
            self.host.add_lanes([row.lane for row in snapshot.view.rows])
        self.show()
        self.host.fleet_shown()
        replayed = snapshot.replay_at is not None and snapshot.freshness.state == "ok"
        if self.polling and not replayed:  # a replayed moment read well doesn't move
            self.timer = self.set_timer(self.poller.delay, self._due)

    @on(Worker.StateChanged)
    def _cycle_failed(self, event: Worker.StateChanged) -> None:
        """A cycle that raised (a bug, not a source failure): say so and try again."""
        worker = event.worker
        if worker.group != "fleet" or event.state != WorkerState.ERROR:
            return
        message = f"{worker.description}: {worker.error}"
        self.notify(message, title="refresh failed", severity="error", markup=False)
        if self.polling:
            self.timer = self.set_timer(MAX_DELAY_S, self._due)

    # --- drawing ------------------------------------------------------------------------------

    def rows(self) -> list[FleetRow]:
        """Every row, in the screen's order (the filter aside)."""
        view = self.snapshot.view if self.snapshot is not None else None
        order = self.order
        return sort_rows(view.rows, order.sort, order.reverse, order.trend) if view else []

    def show(self) -> None:
        self.query_one("#fleet-status", Static).update(self.status())
        rows = filter_rows(self.rows(), self.order.filter)
        stale = self.snapshot is not None and self.snapshot.freshness.state != "ok"
        self.query_one(RowTable).show(table_view(rows, self.order, self.thresholds, stale))

    def status(self) -> Content:
        snapshot, order = self.snapshot, self.order
        view = snapshot.view if snapshot is not None else None
        parts: list[Content | str] = [Content.styled("Fleet", "bold $accent")]
        if view is not None:
            down = sum(1 for row in view.rows if row.up is False and not row.gone)
            gone = sum(1 for row in view.rows if row.gone)
            found = "listed" if view.label is None else f"by {visible(view.label)}"
            parts.append(f"{len(view.rows)} lanes {found}")
            parts += [f"{down} down"] if down else []
            parts += [f"{gone} gone"] if gone else []
            parts.append(clock(view.end))
        parts.append(self.host.window)
        parts.append(f"sort {COLUMN_BY_KEY[order.sort].title} {'▼' if order.reverse else '▲'}")
        parts.append(f"trend {COLUMN_BY_KEY[order.trend].title}")
        if order.filter:
            parts.append(f"filter “{visible(order.filter)}”")
        if self.host.paused:
            parts.append(Content.styled("paused", "bold $warning"))
        line = Content(" · ").join(parts)
        note = freshness_note("fleet", snapshot.freshness) if snapshot else "reading the fleet…"
        if view is not None and view.partial:
            note = f"{note} · partial answer" if note else "the server's answer is partial"
        if not note:
            return line
        tone = "$warning" if snapshot is None or snapshot.freshness.state == "ok" else "$error"
        return Content("\n").join([line, Content.styled(visible(note), tone)])

    # --- keys ---------------------------------------------------------------------------------

    @on(RowTable.Selected)
    def _open(self, event: RowTable.Selected) -> None:
        self.host.open_lane(event.key)
        if not self.polling:  # the lane is open: it alone is read (its feed may be a row's)
            self.workers.cancel_group(self, "fleet")

    def action_sort(self, step: int) -> None:
        self.order.sort = next_key([column.key for column in FLEET_COLUMNS], self.order.sort, step)
        self.show()

    def action_reverse(self) -> None:
        self.order.reverse = not self.order.reverse
        self.show()

    def action_trend(self, step: int) -> None:
        self.order.trend = next_key(NUMERIC_COLUMNS, self.order.trend, step)
        self.show()

    def action_filter(self) -> None:
        self.add_class("-filtering")
        self.query_one(Input).focus()

    @on(Input.Changed)
    def _filter_changed(self, event: Input.Changed) -> None:
        self.order.filter = event.value
        self.show()

    @on(Input.Submitted)
    def _filter_done(self) -> None:
        self.query_one(RowTable).focus()

    def action_clear_filter(self) -> None:
        self.query_one(Input).value = ""  # the field's change clears the filter
        self.remove_class("-filtering")
        self.query_one(RowTable).focus()

    def action_export(self) -> None:
        snapshot = self.snapshot
        if snapshot is None or snapshot.view is None:
            self.notify("the fleet has not been read yet", title="export", severity="warning")
            return
        rows = self.rows()
        moment = snapshot.replay_at if snapshot.replay_at is not None else self.wall()
        target = self.folder / receipt_name("fleet", snapshot.window, moment)

        async def export() -> None:
            try:  # a slow disk must not hold the keys
                written = await asyncio.to_thread(write_fleet_receipt, snapshot, rows, target)
            except OSError as error:
                reason = f"{target}: {error.strerror or error}"
                self.notify(reason, title="export failed", severity="error", markup=False)
            else:
                self.notify(str(written), title="receipt exported", markup=False)

        description = f"export the fleet receipt to {target}"
        self.run_worker(export(), group="export", description=description, exit_on_error=False)
