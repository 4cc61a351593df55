"""The overview's refresh cycle and its receipt file. No Textual. The fleet is polled like a
lane, by the generic `Poller` (back-off, probe, the last good view kept while failing)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from cockpit.core.fleet import FleetRow, FleetView
from cockpit.core.model import FRESH, Freshness
from cockpit.core.text import visible
from cockpit.runtime.fleet_report import fleet_markdown
from cockpit.runtime.poller import Good, Poller, warning_note
from cockpit.runtime.receipts import write_new_file


class FleetFeed(Protocol):
    """Every lane at once over the window ending at `end` (None: now), or SourceFailure:
    found on one server (`sources.fleet`), listed (`listed_fleet`), or both."""

    async def read(self, window_s: float, end: float | None) -> FleetView: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """The overview after a refresh. On failure the last good view stays, marked stale."""

    window: str
    view: FleetView | None
    freshness: Freshness = FRESH
    replay_at: float | None = None


class FleetPoller(Poller[FleetView, FleetView, FleetSnapshot]):
    """Refresh cycles of the fleet: the view is its own figures."""

    feed: FleetFeed

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
            replay_at=self.replay_at,
        )


def write_fleet_receipt(snapshot: FleetSnapshot, rows: Sequence[FleetRow], target: Path) -> Path:
    """The overview's markdown receipt (`fleet_report`, its rows in the screen's order, a
    stale view said so), written to `target` (or beside it); OSError."""
    assert snapshot.view is not None
    heading, _, rest = fleet_markdown(replace(snapshot.view, rows=tuple(rows))).partition("\n")
    if snapshot.freshness.state != "ok":
        said = visible(snapshot.freshness.describe())
        rest = f"\n> **Fleet {said}**: the rows are its last good read.\n{rest}"
    return write_new_file(target, f"{heading}\n{rest}")
