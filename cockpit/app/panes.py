"""The lane's panes as the app draws them: the state they show, the status line, every pane
redrawn from the current snapshots, and the keys that move between the panes (the arrows) and
open one's figures (enter or i) or the ledger tables (l)."""

from __future__ import annotations

from contextlib import suppress

from textual.app import App
from textual.containers import ScrollableContainer
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widget import Widget

from cockpit.app.screens import DetailsScreen, LedgerTablesScreen, details_blocks
from cockpit.config.schema import Config
from cockpit.core.health import check
from cockpit.core.ledger_figures import lane_models
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot, for_lane
from cockpit.runtime.poller import LaneFeed, LedgerPoller
from cockpit.widgets import (
    CacheGauge,
    PhaseBar,
    PrefillPane,
    RatiosPane,
    SpendPane,
    StatusLine,
    StatusView,
)
from cockpit.widgets.folds import NO_LANE, NO_LEDGER, NO_PROFILE, FoldNotes
from cockpit.widgets.pane import Pane
from cockpit.widgets.roofline import RooflinePane
from cockpit.widgets.status import source_status
from cockpit.widgets.tables import LedgerTables
from cockpit.widgets.tails import TailsPane
from cockpit.widgets.trends import TrendsPane
from cockpit.widgets.vitals import HealthLine, VitalStrip

DETAILED = (VitalStrip, Pane)
"""What the arrows focus, in turn, and enter or i opens the figures of."""
PANE_FOCUS = (*DETAILED, ScrollableContainer)
"""Where the arrows move between panes: a pane, or the scrolling body around them."""


class LanePanes(App[None]):
    """The panes' part of the cockpit app (`CockpitApp` sets the state below)."""

    config: Config
    lane_feeds: tuple[LaneFeed, ...]
    lane_index: int = 0
    window: str
    paused: bool = False
    replay_at: float | None
    lane_snapshot: LaneSnapshot | None = None
    ledger_snapshot: LedgerSnapshot | None = None
    ledger_poller: LedgerPoller | None
    _home: Screen[object] | None = None
    """The panes' screen (under the help or the model filter when they are open)."""

    @property
    def ledger_window(self) -> str:
        return self.config.ledger_window or self.window

    @property
    def lane_name(self) -> str:
        return self.lane_feeds[self.lane_index].name if self.lane_feeds else "no lane"

    def lane_ledger(self) -> LedgerSnapshot | None:
        """The ledger as the lane's panes show it: the lane's own models only (its config's
        `ledger_models`, else the `m` filter's model), or the whole ledger."""
        if not self.lane_feeds:
            return self.ledger_snapshot
        feed = self.lane_feeds[self.lane_index]
        named = {lane.name: lane.ledger_models for lane in self.config.lanes}
        models = lane_models(named.get(feed.name, ()), feed.model_filter)
        return for_lane(self.ledger_snapshot, models, self.config.prices)

    def status_view(self) -> StatusView:
        lane, ledger = self.lane_snapshot, self.ledger_snapshot
        sources = [source_status("lane", lane)] if self.lane_feeds else []
        sources += [source_status("ledger", ledger)] if self.ledger_poller else []
        read = [snapshot.totals for snapshot in (lane, ledger) if snapshot and snapshot.totals]
        return StatusView(
            lane=self.lane_name,
            index=self.lane_index + 1 if self.lane_feeds else 0,
            count=len(self.lane_feeds),
            window=self.window,
            ledger_window=self.ledger_window if self.ledger_poller else None,
            evaluated_at=read[0].end if read else None,
            replay_at=self.replay_at,
            sources=tuple(sources),
            paused=self.paused,
            model_filter=self.lane_feeds[self.lane_index].model_filter if self.lane_feeds else None,
            coverage=lane.totals.coverage_note if lane is not None and lane.totals else "",
        )

    def _show(self) -> None:
        """The status line and every pane, from the current snapshots. A pane whose view is
        unchanged is not redrawn."""
        lane, ledger = self.lane_snapshot, self.lane_ledger()
        has_lane, has_ledger = bool(self.lane_feeds), self.ledger_poller is not None
        home = self._home
        if home is None:
            return
        # NoMatches: a read that ends while the app quits finds its panes gone.
        feed = self.lane_feeds[self.lane_index] if has_lane else None
        has_profile = feed is not None and feed.hardware is not None and feed.model is not None
        with self.batch_update(), suppress(NoMatches):
            home.query_one(StatusLine).show(self.status_view())
            findings = check(lane, self.config.health) if lane is not None else None
            home.query_one(VitalStrip).show(lane, has_lane, findings or ())
            home.query_one(HealthLine).show(findings)
            low = self.config.health.hit_rate
            home.query_one(CacheGauge).show(lane, ledger, has_ledger, has_lane, low)
            home.query_one(PrefillPane).show(lane, has_lane)
            home.query_one(PhaseBar).show(lane, has_lane)
            home.query_one(TailsPane).show(lane, has_lane)
            home.query_one(TrendsPane).show(lane, has_lane)
            home.query_one(RooflinePane).show(lane.roofline() if lane else None)
            home.query_one(RatiosPane).show(lane, ledger, has_ledger, has_lane)
            home.query_one(SpendPane).show(ledger, has_ledger)
            home.query_one(LedgerTables).show(ledger, has_ledger)
            # What has no source folds into one line saying how to add it.
            folds = {"-no-lane": not has_lane, "-no-ledger": not has_ledger}
            folds["-no-profile"] = has_lane and not has_profile
            for name, folded in folds.items():
                home.set_class(folded, name)
            notes = zip(folds.values(), (NO_LANE, NO_LEDGER, NO_PROFILE), strict=True)
            home.query_one(FoldNotes).show(tuple(note for folded, note in notes if folded))

    # --- moving between panes ----------------------------------------------------------------

    def _detailed(self) -> list[Widget]:
        return [widget for widget in self.screen.focus_chain if isinstance(widget, DETAILED)]

    def action_focus_pane(self, step: int) -> None:
        panes, focused = self._detailed(), self.focused
        if panes:
            start = panes.index(focused) if focused in panes else (-1 if step > 0 else 0)
            panes[(start + step) % len(panes)].focus()

    def action_details(self) -> None:
        """The focused pane's figures (the vital strip's when no pane is focused)."""
        panes, focused = self._detailed(), self.focused
        pane = focused if focused in panes else panes[0] if panes else None
        if pane is None:
            return
        name = pane.border_title or ("Vital signs" if isinstance(pane, VitalStrip) else "pane")
        body = details_blocks(pane, self.lane_snapshot, self.lane_ledger())
        # border_title reads back as markup: a `[` in a model's name comes back escaped.
        self.push_screen(DetailsScreen(f"{Content.from_markup(name).plain}: details", body))

    def action_ledger_tables(self) -> None:
        self.push_screen(LedgerTablesScreen(self.lane_ledger(), self.ledger_poller is not None))
