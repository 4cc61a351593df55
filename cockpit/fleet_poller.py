"""The overview's refresh cycle (one fleet read per refresh) and its receipt. No Textual.

The fleet is polled like a lane, by the generic `Poller`: back-off while the server fails, a
cheap probe while it can't be reached, the last good view kept (marked stale) meanwhile.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cockpit.figures import format_value
from cockpit.fleet import FLEET_COLUMNS, TREND, FleetColumn, FleetRow, FleetView, format_cell
from cockpit.model import FRESH, Freshness
from cockpit.poller import MAX_DELAY_S, Clocks, Good, Poller, warning_note
from cockpit.receipts import receipts_folder, write_new_file
from cockpit.report import _table
from cockpit.text import visible
from cockpit.timeutil import stamp


class FleetFeed(Protocol):
    """Every lane of one server, as the app sees it (`sources.fleet.FleetSource`)."""

    async def read(self, window_s: float, end: float | None) -> FleetView:
        """Every lane's row over the window ending at `end` (None: now); SourceFailure."""
        ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """The overview after a refresh. On failure the last good view stays, marked stale."""

    window: str
    view: FleetView | None
    freshness: Freshness = FRESH
    latency_s: float | None = None
    updated_at: float | None = None
    replay_at: float | None = None


class FleetPoller(Poller[FleetView, FleetView, FleetSnapshot]):
    """Refresh cycles of the fleet: the view is its own figures."""

    def __init__(
        self,
        feed: FleetFeed,
        refresh_s: float,
        *,
        replay_at: float | None = None,
        clocks: Clocks | None = None,
        max_delay_s: float = MAX_DELAY_S,
    ) -> None:
        super().__init__(
            feed.read,
            refresh_s,
            replay_at=replay_at,
            clocks=clocks,
            max_delay_s=max_delay_s,
            probe=getattr(feed, "probe", None),
        )
        self.feed = feed

    def figures(self, totals: FleetView) -> FleetView:
        return totals

    def snapshot(
        self,
        window: str,
        good: Good[FleetView, FleetView] | None,
        freshness: Freshness,
        latency_s: float | None,
    ) -> FleetSnapshot:
        if freshness.state == "ok" and good is not None and good.totals.warnings:
            freshness = Freshness("ok", reason=warning_note(good.totals.warnings))
        return FleetSnapshot(
            window=window,
            view=good.totals if good else None,
            freshness=freshness,
            latency_s=latency_s,
            updated_at=good.read_at if good else None,
            replay_at=self.replay_at,
        )


# --- the receipt ------------------------------------------------------------------------


def _cell(row: FleetRow, column: FleetColumn) -> str:
    text = format_cell(row, column)
    reason = row.reasons.get(column.key)
    return f"{text} ({reason})" if text == "—" and reason else text


def fleet_markdown(snapshot: FleetSnapshot, rows: Sequence[FleetRow] | None = None) -> str:
    """The overview as markdown: every lane's row (in `rows`' order: the screen's), the
    server, the one query and what the server warned of; outside text made visible."""
    view = snapshot.view
    lines = ["# lane-cockpit fleet receipt", ""]
    if view is None:
        return "\n".join([*lines, f"The fleet: {snapshot.freshness.describe()}", ""])
    if snapshot.freshness.state != "ok" or snapshot.freshness.reason:
        lines += [f"> **Fleet {snapshot.freshness.describe()}**", ""]
    lines += [f"## Every lane by `{view.label}`, {snapshot.window} to {stamp(view.end)}", ""]
    columns = [column for column in FLEET_COLUMNS if column.key != TREND]
    shown = view.rows if rows is None else rows
    table = (tuple(_cell(row, column) for column in columns) for row in shown)
    lines += _table(tuple(column.title for column in columns), table)
    lines += ["", "## Provenance", "", f"- Server: {view.server or 'unknown'}"]
    if view.query_seconds is not None:
        lines.append(f"- One request, {format_value(view.query_seconds, 'seconds')}")
    lines += [f"- Server warning: {warning}" for warning in view.warnings]
    if view.partial:
        lines.append("- The server said its answer is partial")
    lines += ["", "```promql", view.query, "```"] if view.query else []
    return "\n".join(map(visible, lines)) + "\n"  # a line each, whatever a name holds


def write_fleet_receipt(
    snapshot: FleetSnapshot, rows: Sequence[FleetRow] | None, target: Path
) -> Path:
    """The overview's markdown receipt, written to `target` (or beside it); OSError."""
    if target.parent == receipts_folder(None):  # ours to make; a folder the config names exists
        target.parent.mkdir(parents=True, exist_ok=True)
    return write_new_file(target, fleet_markdown(snapshot, rows))
