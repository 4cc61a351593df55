"""The one refresh loop: an answer of a cycle started before a newer one is dropped, the next
cycle is armed after the poller's delay unless paused or a replayed moment was read well; the
overview and the lane panes share it (pause said at once on either)."""

from __future__ import annotations

from pathlib import Path

from textual.app import App

from cockpit.app.app import make_app
from cockpit.app.refresh import Cycle, LaneRead, RefreshLoop
from cockpit.core.snapshot import LaneSnapshot
from cockpit.runtime.poller import LanePoller
from tests.support.feeds import ScriptedLaneFeed, SourceDown, config, fixed_clocks
from tests.support.fleet import DISCOVER, ScriptedFleetFeed
from tests.support.pilot import on_screen, settle


class OneLoop(App[None]):
    """An app with one lane loop: the snapshots it is handed, in order."""

    def __init__(self, poller: LanePoller, paused: bool = False) -> None:
        super().__init__()
        self.poller, self.paused, self.shown = poller, paused, list[LaneSnapshot]()
        self.loop = RefreshLoop(self, "lane", LaneRead, self.cycle, lambda: self.paused)

    def cycle(self) -> Cycle[LaneSnapshot]:
        return Cycle(self.poller, "1h", "read the lane")

    def on_lane_read(self, message: LaneRead) -> None:
        snapshot = self.loop.receive(message)
        if snapshot is not None:
            self.shown.append(snapshot)


async def test_an_answer_of_a_cycle_started_before_a_newer_one_is_dropped() -> None:
    feed = ScriptedLaneFeed(delay_s=0.05)
    app = OneLoop(LanePoller(feed, 3600.0, clocks=fixed_clocks()))
    async with app.run_test() as pilot:
        app.loop.read_now()
        await pilot.pause(0.01)
        feed.scale = 2.0  # the second cycle reads other totals
        app.loop.read_now()
        await settle(pilot)
        assert len(feed.reads) == 2 and len(app.shown) == 1
        shown = app.shown[0].totals
        assert shown is not None and shown.values == (await feed.read(3600.0, None)).values


async def test_the_next_cycle_is_armed_after_the_pollers_delay() -> None:
    feed = ScriptedLaneFeed()
    app = OneLoop(LanePoller(feed, 0.05, clocks=fixed_clocks()))
    async with app.run_test() as pilot:
        app.loop.read_now()
        for _ in range(200):
            if len(app.shown) >= 3:
                break
            await pilot.pause(0.01)
        assert len(app.shown) >= 3  # re-armed after each answer, without being asked


async def test_no_next_cycle_while_paused_and_a_failing_source_backs_off() -> None:
    feed = ScriptedLaneFeed(failure=SourceDown("connection refused"))
    poller = LanePoller(feed, 0.05, clocks=fixed_clocks())
    app = OneLoop(poller, paused=True)
    async with app.run_test() as pilot:
        app.loop.read_now()
        await settle(pilot)
        assert len(app.shown) == 1 and app.loop.timer is None
        app.paused = False
        app.loop.read_now()
        await settle(pilot)
        assert app.loop.timer is not None and poller.delay == 0.1  # ×2 after two failures


async def test_a_replayed_moment_read_well_is_not_read_again() -> None:
    feed = ScriptedLaneFeed()
    app = OneLoop(LanePoller(feed, 0.01, replay_at=1.0e9, clocks=fixed_clocks()))
    async with app.run_test() as pilot:
        app.loop.read_now()
        await settle(pilot)
        await pilot.pause(0.1)
        assert len(feed.reads) == 1 and app.loop.timer is None


async def test_pause_on_the_overview_is_said_at_once_and_resume_reads_the_fleet() -> None:
    fleet = ScriptedFleetFeed()
    app = make_app(
        config("lane-a", discover=DISCOVER),
        [ScriptedLaneFeed()],
        None,
        clocks=fixed_clocks(),
        fleet=fleet,
        export_dir=Path("/nonexistent"),
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await on_screen(pilot, "5 lanes by job")
        await pilot.press("p")
        await on_screen(pilot, "· paused")
        assert len(fleet.reads) == 1
        await pilot.press("p")
        await settle(pilot)
        assert len(fleet.reads) == 2 and "· paused" not in await on_screen(pilot, "lane-e")
