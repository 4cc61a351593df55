"""The overview's receipt: every lane's row as markdown or JSON, the one query asked of the
lanes found by a label, where each listed lane was read. Pure: no I/O. `cockpit report --fleet`
and the overview's `e` both call these on a `FleetView`, so screen and receipt agree.
"""

from __future__ import annotations

from typing import Any

from cockpit.core.fleet import (
    COLUMN_BY_KEY,
    NUMERIC_COLUMNS,
    TREND,
    UP,
    FleetColumn,
    FleetRow,
    FleetView,
    format_cell,
    shown_columns,
)
from cockpit.core.text import visible
from cockpit.core.timeutil import promql_duration, stamp
from cockpit.runtime.report import markdown_table


def receipt_columns(view: FleetView) -> tuple[FleetColumn, ...]:
    """The overview's columns but the trend: a receipt is one read, no trend to draw."""
    return tuple(column for column in shown_columns(view.rows) if column.key != TREND)


def _state(row: FleetRow) -> str:
    return format_cell(row, COLUMN_BY_KEY[UP])


def _sources(view: FleetView) -> str:
    count = len(view.listed)
    listed = f"{count} lane{'s' * (count != 1)} listed in the config, each read by its own query"
    parts = [listed] * bool(count)
    if view.label is not None:
        parts.insert(0, f"Server {visible(view.server)}, lanes by `{visible(view.label)}`")
    return "; ".join(parts)


def fleet_markdown(view: FleetView) -> str:
    """The overview as a markdown receipt: a heading, the server's warnings, one row per
    lane (missing values `—`, why listed under the table), the one query of the lanes found
    by a label, where each listed lane was read."""
    states = [_state(row) for row in view.rows]
    counts = ", ".join(f"{states.count(s)} {s}" for s in ("up", "down", "gone") if s in states)
    lines = [
        f"# Fleet — {len(view.rows)} lanes" + (f" ({counts})" if counts else ""),
        "",
        f"{_sources(view)}; window {promql_duration(view.window_s)} ending {stamp(view.end)}.",
        "",
    ]
    lines += [f"> **{visible(warning)}**" for warning in view.warnings]
    lines += [""] if view.warnings else []
    columns = receipt_columns(view)
    rows = [tuple(format_cell(row, column) for column in columns) for row in view.rows]
    lines += markdown_table(tuple(column.title for column in columns), rows)
    notes = [f"- {row.lane}: {row.down_reason}" for row in view.rows if row.down_reason] + [
        f"- {row.lane}, {column.title}: {row.reasons[column.key]}"
        for row in view.rows
        for column in columns
        if column.key in row.reasons and not row.gone
    ]
    if notes:
        lines += ["", "Why:", "", *(visible(note) for note in notes)]
    if view.label is not None:
        found = f"one `/api/v1/query` for every lane found by `{visible(view.label)}`"
        lines += ["", f"Query ({found}):", "", "```promql", view.query, "```"]
    if view.listed:
        lines += ["", "Lanes listed (`cockpit report --lane NAME` shows a lane's queries):", ""]
        lines += [visible(f"- {lane}: {where}") for lane, where in view.listed.items()]
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
        "listed": dict(view.listed),
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
