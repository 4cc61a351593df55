"""The overview's receipt: every lane's row as markdown or JSON, with the one query asked.

`cockpit report --fleet` and the overview's `e` both call these on a `FleetView`, so the
screen and the receipt can't disagree. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

from cockpit.fleet import (
    COLUMN_BY_KEY,
    FLEET_COLUMNS,
    NUMERIC_COLUMNS,
    TREND,
    UP,
    FleetRow,
    FleetView,
    format_cell,
)
from cockpit.report import _table
from cockpit.text import visible
from cockpit.timeutil import promql_duration, stamp

COLUMNS = tuple(column for column in FLEET_COLUMNS if column.key != TREND)
"""A receipt is one read: no trend to draw."""


def _state(row: FleetRow) -> str:
    return format_cell(row, COLUMN_BY_KEY[UP])


def _counts(view: FleetView) -> str:
    states = [_state(row) for row in view.rows]
    found = ", ".join(f"{states.count(s)} {s}" for s in ("up", "down", "gone") if s in states)
    return f"{len(view.rows)} lanes" + (f" ({found})" if found else "")


def fleet_markdown(view: FleetView) -> str:
    """The overview as a markdown receipt: a heading, the server's warnings, one row per
    lane (missing values `—`, why listed under the table), the query."""
    lines = [
        f"# Fleet — {_counts(view)}",
        "",
        f"Server {visible(view.server)}, lanes by `{visible(view.label)}`, window "
        f"{promql_duration(view.window_s)} ending {stamp(view.end)}.",
        "",
    ]
    lines += [f"> **{visible(warning)}**" for warning in view.warnings]
    lines += [""] if view.warnings else []
    rows = [tuple(format_cell(row, column) for column in COLUMNS) for row in view.rows]
    lines += _table(tuple(column.title for column in COLUMNS), rows)
    notes = [f"- {row.lane}: {row.down_reason}" for row in view.rows if row.down_reason] + [
        f"- {row.lane}, {title}: {row.reasons[key]}"
        for row in view.rows
        for key, title in ((c.key, c.title) for c in COLUMNS)
        if key in row.reasons and not row.gone
    ]
    if notes:
        lines += ["", "Why:", "", *(visible(note) for note in notes)]
    lines += ["", "Query (one `/api/v1/query` for every lane):", "", "```promql", view.query, "```"]
    return "\n".join(lines) + "\n"


def fleet_json(view: FleetView) -> dict[str, Any]:
    """The overview as JSON: every row's numbers (unformatted), states and reasons."""
    return {
        "server": view.server,
        "label": view.label,
        "window_s": view.window_s,
        "end": view.end,
        "partial": view.partial,
        "warnings": list(view.warnings),
        "query": view.query,
        "lanes": [
            {
                "lane": row.lane,
                "state": _state(row),
                "dialect": row.dialect,
                "down_reason": row.down_reason,
                "values": {key: row.values.get(key) for key in NUMERIC_COLUMNS},
                "lower_bounds": sorted(row.above),
                "reasons": dict(row.reasons),
            }
            for row in view.rows
        ],
    }
