"""The lane's screen: the status line, the vital strip, the health line and the panes (prefill
first), drawn from the snapshots the app hands it. What has no source folds to a line."""

from __future__ import annotations

from contextlib import suppress
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple, get_type_hints

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Static

from cockpit.core.health import Thresholds, check
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
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
from cockpit.widgets.grid import PaneGrid
from cockpit.widgets.models import ModelsPane
from cockpit.widgets.offload import OffloadPane
from cockpit.widgets.roofline import RooflinePane
from cockpit.widgets.tables import LedgerTables
from cockpit.widgets.tails import TailsPane
from cockpit.widgets.trends import TrendsPane
from cockpit.widgets.vitals import HealthLine, VitalStrip

MIN_WIDTH = 40
MIN_HEIGHT = 12
TOO_SMALL = f"terminal too small: needs {MIN_WIDTH}×{MIN_HEIGHT}"


@dataclass(frozen=True, slots=True)
class LaneView:
    """What the lane's screen draws: the snapshots, the status line, which sources exist."""

    lane: LaneSnapshot | None
    ledger: LedgerSnapshot | None
    """The ledger as the lane's panes show it (its models only)."""
    status: StatusView
    thresholds: Thresholds
    has_lane: bool
    has_ledger: bool
    has_profile: bool


def lane_widgets() -> ComposeResult:
    """The lane screen's widgets. The app composes them, onto its default screen: so they are
    mounted before the app is (a screen's own compose would come later)."""
    yield StatusLine(id="status")
    yield VitalStrip(id="vitals")
    yield HealthLine(id="health")
    yield Static(TOO_SMALL, id="too-small")
    with VerticalScroll(id="body"):
        with PaneGrid(id="panes"):
            yield CacheGauge(id="cache")
            yield PrefillPane(id="prefill")
            yield PhaseBar(id="phases")
            yield TailsPane(id="tails")
            yield OffloadPane(id="offload")
            yield TrendsPane(id="trends")
            yield RooflinePane(id="roofline", own_height=True)
            yield RatiosPane(id="ratios")
            yield SpendPane(id="spend")
            yield LedgerTables(id="tables")
            yield ModelsPane(id="models")
        yield FoldNotes(id="folds")
    yield Footer(id="keys", compact=True)


class LaneScreen(Screen[object]):
    """The lane's panes (`lane_widgets`). A pane whose view is unchanged is not redrawn; a
    folded or hidden pane builds its view only when it is shown (see `Pane.show`)."""

    @cached_property
    def widgets(self) -> LaneWidgets:
        """The screen's widgets, found once (NoMatches before they are mounted)."""
        return LaneWidgets(*(self.query_one(kind) for kind in get_type_hints(LaneWidgets).values()))

    def show(self, view: LaneView) -> None:
        lane, ledger, has_lane, has_ledger = view.lane, view.ledger, view.has_lane, view.has_ledger
        # NoMatches: a read that ends while the app quits finds its panes gone.
        with self.app.batch_update(), suppress(NoMatches):
            found = self.widgets
            # Folded first: a pane shown by it builds its view now, one folded by it doesn't.
            folds = {"-no-lane": not has_lane, "-no-ledger": not has_ledger}
            folds["-no-profile"] = has_lane and not view.has_profile
            for name, folded in folds.items():
                self.set_class(folded, name)
            found.status.show(view.status)
            findings = check(lane, view.thresholds) if lane is not None else None
            found.vitals.show(lane, has_lane, findings or ())
            found.health.show(findings)
            low = view.thresholds.hit_rate
            found.cache.show(lane, ledger, has_ledger, has_lane, low)
            found.prefill.show(lane, has_lane)
            found.phases.show(lane, has_lane)
            found.tails.show(lane, has_lane)
            found.offload.show(lane, has_lane)
            found.trends.show(lane, has_lane)
            found.roofline.show(lane.roofline() if lane else None)
            found.ratios.show(lane, ledger, has_ledger, has_lane)
            found.spend.show(ledger, has_ledger)
            found.tables.show(ledger, has_ledger)
            found.models.show(lane, has_lane)
            notes = zip(folds.values(), (NO_LANE, NO_LEDGER, NO_PROFILE), strict=True)
            found.folds.show(tuple(note for folded, note in notes if folded))


class LaneWidgets(NamedTuple):
    """The lane screen's widgets, by what they show."""

    status: StatusLine
    vitals: VitalStrip
    health: HealthLine
    cache: CacheGauge
    prefill: PrefillPane
    phases: PhaseBar
    tails: TailsPane
    offload: OffloadPane
    trends: TrendsPane
    roofline: RooflinePane
    ratios: RatiosPane
    spend: SpendPane
    tables: LedgerTables
    models: ModelsPane
    folds: FoldNotes
