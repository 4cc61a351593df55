"""The fleet's overview as the app wires it: the cockpit opens on it, enter opens a lane's panes
(that lane alone polled until escape), lanes found while it runs get feeds of their own."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from cockpit.app.polling import SourcePolling
from cockpit.core.fleet import lane_config
from cockpit.runtime.feeds import build_lane_feeds
from cockpit.runtime.poller import Clocks, LanePoller
from cockpit.runtime.receipts import receipts_folder
from cockpit.widgets.fleet import FleetScreen


class FleetOverview(SourcePolling):
    """The overview's part of the cockpit app: it is the overview's `FleetHost`."""

    refresh_s: float
    clocks: Clocks
    export_dir: Path | None
    first_lane: str | None

    def open_on_overview(self) -> None:
        """With a fleet feed, open on the overview (or on the lane named by `--lane`)."""
        if self.fleet_poller is None:
            return
        folder = self.export_dir or receipts_folder(self.config.export_dir)
        health, wall = self.config.health, self.clocks.wall
        self._overview = FleetScreen(self.fleet_poller, self, health, folder, wall)
        self.install_screen(self._overview, "fleet")
        lane = self.first_lane
        if lane is not None and lane in {feed.name for feed in self.lane_feeds}:
            self.open_lane(lane)
        else:
            self.action_overview()

    def action_overview(self) -> None:
        """Back to the overview from the lane's panes; the fleet is read at once."""
        if self._overview is None or self._overview in self.screen_stack:
            return
        self.push_screen(self._overview)
        self._read_lane()

    def open_lane(self, name: str) -> None:
        """Lane `name`'s panes, from the overview: it alone is polled until escape."""
        names = [feed.name for feed in self.lane_feeds]
        if name not in names:
            return
        if self._overview is not None and self.screen is self._overview:
            self.pop_screen()
        self.lane_index = names.index(name)
        self._lane_changed()

    def fleet_shown(self) -> None:
        """The overview drew a fleet read (for the bench probe, as a lane's read does)."""
        self._probe_refresh()

    def add_lanes(self, names: Sequence[str]) -> None:
        """A feed, on the discovery's server, for each lane found that has none yet."""
        discover, known = self.config.discover, {feed.name for feed in self.lane_feeds}
        found = [name for name in names if name not in known]
        if discover is None or not found:
            return
        lanes = tuple(lane_config(discover, name) for name in found)
        feeds = build_lane_feeds(replace(self.config, lanes=lanes))
        self.lane_feeds += tuple(feeds)
        self.lane_pollers += [
            LanePoller(feed, self.refresh_s, replay_at=self.replay_at, clocks=self.clocks)
            for feed in feeds
        ]
