"""The lane and the ledger refresh together: one shared tick, one screen update per period."""

from __future__ import annotations

import statistics
import time

import pytest

from cockpit.app import CockpitApp, make_app
from cockpit.widgets import StatusLine
from tests.test_app_feeds import ScriptedLaneFeed, ScriptedLedgerFeed, config


class Timed(ScriptedLaneFeed):
    """Notes when each read starts (monotonic)."""

    starts: list[float]

    async def read(self, window_s: float, end: float | None):  # type: ignore[no-untyped-def]
        self.starts.append(time.monotonic())
        return await super().read(window_s, end)


class TimedLedger(ScriptedLedgerFeed):
    starts: list[float]

    async def read(self, window_s: float, end: float | None):  # type: ignore[no-untyped-def]
        self.starts.append(time.monotonic())
        return await super().read(window_s, end)


def shows(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Every time the app shows its state (a spy on the real `_show_all`)."""
    seen: list[float] = []
    original = CockpitApp._show_all

    def spy(self: CockpitApp) -> None:
        seen.append(time.monotonic())
        original(self)

    monkeypatch.setattr(CockpitApp, "_show_all", spy)
    return seen


async def test_both_sources_start_on_one_tick_and_show_once_per_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refresh = 0.2
    lane = Timed("lane-a", delay_s=0.005)
    lane.starts = []
    # The ledger answers 40 ms after the lane: on separate timers the two drift apart by that
    # much every period, and each answer is a screen update of its own.
    ledger = TimedLedger(delay_s=0.045)
    ledger.starts = []
    seen = shows(monkeypatch)
    app = make_app(config("lane-a"), [lane], ledger, refresh_s=refresh)
    async with app.run_test() as pilot:
        await pilot.pause(8 * refresh + 0.1)
        periods = min(len(lane.starts), len(ledger.starts))
        assert periods >= 6
        gaps = [abs(a - b) for a, b in zip(lane.starts, ledger.starts, strict=False)]
        # on separate timers the gap grows by 40 ms a period (0.24 s after six)
        assert statistics.median(gaps) < 0.03, gaps
        # drifting, every later gap is wider; one late start on a loaded machine is not drift
        assert sum(gap >= 0.12 for gap in gaps) <= 1, gaps
        # on_mount's placeholder, then one per period (the last may still be held). On separate
        # timers that is two a period; on a loaded machine an answer may come after the hold
        # (~50 ms late) and split one or two periods, which is not that.
        assert len(seen) <= 1 + periods + 2, (len(seen), periods)
        assert app.lane_snapshot is not None and app.ledger_snapshot is not None


async def test_a_slow_ledger_does_not_hold_the_lane_back() -> None:
    lane = ScriptedLaneFeed("lane-a")
    ledger = ScriptedLedgerFeed(delay_s=10.0)
    app = make_app(config("lane-a"), [lane], ledger)
    async with app.run_test() as pilot:
        started = time.monotonic()
        while "lane ok" not in pilot.app.query_one(StatusLine).render().plain:
            assert time.monotonic() - started < 1.0, "the lane waited for the ledger"
            await pilot.pause(0.01)
        assert "ledger reading…" in pilot.app.query_one(StatusLine).render().plain
