"""The whole cockpit with fixed figures, at 80×24 and 160×48 (pytest-textual-snapshot)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from cockpit.app import CockpitApp, make_app
from tests.test_app_feeds import (
    ScriptedLaneFeed,
    ScriptedLedgerFeed,
    SourceDown,
    config,
    fixed_clocks,
)
from tests.test_widgets_snapshots import utc  # noqa: F401  (autouse fixture)

SnapCompare = Callable[..., bool]


def cockpit(lane_failure: Exception | None = None) -> CockpitApp:
    lanes = [ScriptedLaneFeed("lane-a", failure=lane_failure), ScriptedLaneFeed("lane-b")]
    return make_app(config("lane-a", "lane-b"), lanes, ScriptedLedgerFeed(), clocks=fixed_clocks())


async def settled(pilot: Pilot[None]) -> None:
    for _ in range(500):
        if not any(worker.is_running for worker in pilot.app.workers):
            break
        await asyncio.sleep(0.005)
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_cockpit(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    assert snap_compare(cockpit(), terminal_size=size, run_before=settled)


def test_cockpit_lane_missing(snap_compare: SnapCompare) -> None:
    app = cockpit(SourceDown("connection refused (127.0.0.1:9090)"))
    assert snap_compare(app, terminal_size=(160, 48), run_before=settled)


def test_cockpit_help_screen(snap_compare: SnapCompare) -> None:
    async def help_open(pilot: Pilot[None]) -> None:
        await settled(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(cockpit(), terminal_size=(80, 24), run_before=help_open)


def test_cockpit_too_small(snap_compare: SnapCompare) -> None:
    assert snap_compare(cockpit(), terminal_size=(30, 10), run_before=settled)
