"""The overview's rows as the fleet table shows them, coloured by the lane panes' health rules,
and its status line. Lane names are data: never markup."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from itertools import takewhile

from textual.content import Content

from cockpit.core.figures import LaneFigures
from cockpit.core.fleet import (
    COLUMN_BY_KEY,
    DEFAULT_TREND,
    FIGURE_COLUMNS,
    LANE,
    TREND,
    UP,
    FleetColumn,
    FleetRow,
    format_cell,
    shown_columns,
    sort_rows,
)
from cockpit.core.health import Thresholds, check
from cockpit.core.model import Figure, frozen_map
from cockpit.core.snapshot import LaneSnapshot
from cockpit.core.text import visible
from cockpit.core.timeutil import clock
from cockpit.runtime.poller import FleetSnapshot

from .fleet_table import TableView
from .pane import TONE_STYLE, cut, freshness_note, sparkline

TREND_CELLS = 12  # refreshes the trend column draws, a character each (newest at the right)


@dataclass
class FleetOrder:
    """How the overview shows the rows: sort column and direction, filter, trend column."""

    sort: str = LANE
    reverse: bool = False
    filter: str = ""
    trend: str = DEFAULT_TREND


def next_key(keys: Sequence[str], current: str) -> str:
    """The key after `current` (the first after the last, or when `current` is not there)."""
    return keys[(keys.index(current) + 1) % len(keys)] if current in keys else keys[0]


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
    """A cell as the panes format its figure, DOWN for a down engine, the trend a sparkline
    (of the last TREND_CELLS refreshes alone). Only the lane's name is data: a figure's text
    is the panes' own format, with nothing invisible to show."""
    if column.key == TREND:
        points = tuple(values.get(trend) for values in row.refreshes[-TREND_CELLS:])
        return sparkline(points, len(points)).rjust(TREND_CELLS)
    if column.key == UP and row.up is False and not row.gone:
        return "DOWN"
    if column.key == LANE:
        return cut(visible(row.lane), LANE_CELLS)
    return format_cell(row, column)


LANE_CELLS = 40
"""The widest the Lane column gets: a longer name ends in `…` (whole in the lane's panes)."""


def table_view(
    rows: Sequence[FleetRow], order: FleetOrder, thresholds: Thresholds, stale: bool
) -> TableView:
    """The rows as the table draws them, gone lanes (and a stale fleet) dimmed; a row's
    colours are worked out when it is drawn (the rows on screen, not the whole fleet)."""
    arrow = " ▼" if order.reverse else " ▲"
    columns = shown_columns(rows)
    titles = tuple(
        (f"Trend {COLUMN_BY_KEY[order.trend].title}" if c.key == TREND else c.title)
        + (arrow if c.key == order.sort else "")
        for c in columns
    )
    rows = tuple(rows)

    @cache
    def cell_styles(number: int) -> tuple[str, ...]:
        tones = row_tones(rows[number], thresholds)
        styles = {LANE: "bold", **{key: TONE_STYLE[tone] for key, tone in tones.items()}}
        return tuple(styles.get(column.key, "") for column in columns)

    return TableView(
        titles,
        tuple(column.unit is not None for column in columns),
        tuple(row.lane for row in rows),
        tuple(tuple(cell_text(row, c, order.trend) for c in columns) for row in rows),
        tuple("dim" if row.gone or stale else "" for row in rows),
        cell_styles,
    )


def ordered_rows(snapshot: FleetSnapshot | None, order: FleetOrder) -> list[FleetRow]:
    """Every row, in the overview's order (the filter aside)."""
    view = snapshot.view if snapshot is not None else None
    return sort_rows(view.rows, order.sort, order.reverse, order.trend) if view else []


def fleet_status(
    snapshot: FleetSnapshot | None, order: FleetOrder, window: str, paused: bool
) -> Content:
    """The overview's status line: lanes found, down and gone, window, order, freshness."""
    view = snapshot.view if snapshot is not None else None
    parts: list[Content | str] = [Content.styled("Fleet", "bold $accent")]
    if view is not None:
        down = sum(1 for row in view.rows if row.up is False and not row.gone)
        gone = sum(1 for row in view.rows if row.gone)
        found = "listed" if view.label is None else f"by {visible(view.label)}"
        parts += [f"{len(view.rows)} lanes {found}", f"{down} down" if down else ""]
        parts += [f"{gone} gone" if gone else "", clock(view.end)]
    parts.append(window)
    parts.append(f"sort {COLUMN_BY_KEY[order.sort].title} {'▼' if order.reverse else '▲'}")
    parts.append(f"trend {COLUMN_BY_KEY[order.trend].title}")
    parts.append(f"filter “{visible(order.filter)}”" if order.filter else "")
    parts.append(Content.styled("paused" if paused else "", "bold $warning"))
    line = Content(" · ").join(part for part in parts if part)
    note = freshness_note("fleet", snapshot.freshness) if snapshot else "reading the fleet…"
    if view is not None and view.partial:
        note = f"{note} · partial answer" if note else "the server's answer is partial"
    if not note:
        return line
    tone = "$warning" if snapshot is None or snapshot.freshness.state == "ok" else "$error"
    return Content("\n").join([line, Content.styled(visible(note), tone)])
