"""The KV offload and transfer pane: there on a lane whose engine has a KV connector, absent
(and never focused) on a plain one; its figures in the details; the cockpit at 160×48 with it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from cockpit.app.app import CockpitApp, make_app
from cockpit.app.screens import DetailsScreen
from cockpit.core.catalogue import definition, pane_keys
from cockpit.core.model import FRESH
from cockpit.widgets.offload import OffloadPane, offload_view
from cockpit.widgets.pane import Pane, Row
from tests.support.feeds import ScriptedLaneFeed, ScriptedLedgerFeed, config, fixed_clocks
from tests.support.pilot import focus_pane, on_screen, settle
from tests.support.screentext import screen_text
from tests.support.snapshots import lane_snapshot, rows

pytestmark = pytest.mark.usefixtures("utc")

SnapCompare = Callable[..., bool]
CONNECTORS = {
    "offload_load_bytes": 1.6e9,
    "offload_load_time": 0.8,
    "offload_store_bytes": 6.4e9,
    "offload_store_time": 2.56,
    "offload_cpu_usage": 0.42,
    "offload_alloc_failures": 2.0,
    "offload_stores_skipped": 18.0,
    "nixl_xfer_sum": 1.95,
    "nixl_xfer_count": 125.0,
    "nixl_bytes_sum": 2.097152e9,
    "nixl_failed_transfers": 1.0,
    "nixl_failed_notifications": 0.0,
    "nixl_expired_reqs": 0.0,
}
"""An hour of tests/fixtures/vllm's two connector expositions (half of each counter there)."""


def cockpit(connectors: bool) -> CockpitApp:
    lane = ScriptedLaneFeed("lane-a", changes=CONNECTORS if connectors else {})
    return make_app(config("lane-a"), [lane], ScriptedLedgerFeed(), clocks=fixed_clocks())


async def test_a_plain_lane_has_no_offload_pane_and_never_focuses_it() -> None:
    app = cockpit(connectors=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert not app.query_one(OffloadPane).display
        assert "KV offload" not in screen_text(app)
        for _ in range(len(app.query(Pane)) + 2):
            await pilot.press("down")
            assert app.focused is None or app.focused.id != "offload"


async def test_a_lane_with_connectors_shows_the_pane_its_details_and_its_rules() -> None:
    app = cockpit(connectors=True)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.query_one(OffloadPane).display
        # 1.6 GB of loads in the hour: 444,444 B/s; 1.6 GB over 0.8 s of loading: 2 GB/s.
        await on_screen(pilot, "KV offload & transfer", "444.4 kB/s", "2 GB/s", "15.6 ms")
        await on_screen(pilot, "KV offload allocation failures in the window: 2")
        await on_screen(pilot, "NIXL failed transfers in the window: 1")
        assert "NIXL failed notifications in the window" not in screen_text(app)
        await focus_pane(pilot, "offload")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailsScreen)
        await on_screen(pilot, *(definition(key)[:40] for key in pane_keys("offload")[:3]))


async def settled(pilot: Pilot[None]) -> None:
    for _ in range(500):
        if not any(worker.is_running for worker in pilot.app.workers):
            break
        await asyncio.sleep(0.005)
    await pilot.pause()


def test_cockpit_with_kv_connectors(snap_compare: SnapCompare) -> None:
    assert snap_compare(cockpit(connectors=True), terminal_size=(160, 48), run_before=settled)


def test_each_connector_shows_its_own_rows_and_a_moved_failure_its_colour() -> None:
    offload_only = {k: v for k, v in CONNECTORS.items() if k.startswith("offload_")}
    view = offload_view(lane_snapshot(FRESH, **offload_only))
    keys = [line.figure.key for line in view.lines if isinstance(line, Row) and line.figure]
    assert keys == [key for key in pane_keys("offload") if key.startswith("offload_")]
    shown = rows(offload_view(lane_snapshot(FRESH, **CONNECTORS))).values()
    tones = {row.figure.key: row.tone for row in shown if row.figure}
    assert tones["offload_alloc_failures"] == "warn" and tones["nixl_failed_transfers"] == "bad"
    assert tones["nixl_failed_notifications"] == tones["offload_stores_skipped"] == "plain"
    assert offload_view(lane_snapshot()).lines == ()
