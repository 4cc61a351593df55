"""The overview's receipt (`cockpit report --fleet`, the overview's `e`): every lane's row as
markdown or JSON, the query of the lanes found by a label, where each listed lane was read."""

from __future__ import annotations

from typing import Any

from cockpit.core.fleet import (
    COLUMN_BY_KEY,
    NUMERIC_COLUMNS,
    TREND,
    UP,
    FleetRow,
    FleetView,
    format_cell,
    shown_columns,
)
from cockpit.core.text import visible
from cockpit.core.timeutil import promql_duration, stamp
from cockpit.runtime.report import markdown_table


def _state(row: FleetRow) -> str:
    return format_cell(row, COLUMN_BY_KEY[UP])


def fleet_markdown(view: FleetView) -> str:
    """The overview as markdown: one row per lane (missing values `—`, why under the table)."""
    states = [_state(row) for row in view.rows]
    counts = ", ".join(f"{states.count(s)} {s}" for s in ("up", "down", "gone") if s in states)
    count = len(view.listed)
    listed = f"{count} lane{'s' * (count != 1)} listed in the config, each read by its own query"
    sources = [listed] * bool(count)
    if view.label is not None:
        sources.insert(0, f"Server {visible(view.server)}, lanes by `{visible(view.label)}`")
    lines = [
        f"# Fleet — {len(view.rows)} lanes" + (f" ({counts})" if counts else ""),
        "",
        f"{'; '.join(sources)}; window {promql_duration(view.window_s)} ending {stamp(view.end)}.",
        "",
    ]
    lines += [f"> **{visible(warning)}**" for warning in view.warnings]
    lines += [""] if view.warnings else []
    columns = [column for column in shown_columns(view.rows) if column.key != TREND]  # one read
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
