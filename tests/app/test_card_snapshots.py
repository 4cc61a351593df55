"""The cockpit with benchmark cards (pytest-textual-snapshot): a card running on the lane
(the status line's card and its time), and the cards screen comparing two kept cards."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from textual.pilot import Pilot

from cockpit.app.app import CockpitApp, make_app
from tests.support.cards import running_card, two_kept_cards
from tests.support.feeds import ScriptedLaneFeed, ScriptedLedgerFeed, config, fixed_clocks
from tests.support.pilot import settle

pytestmark = pytest.mark.usefixtures("utc")

SnapCompare = Callable[..., bool]


def cockpit() -> CockpitApp:
    lanes = [ScriptedLaneFeed("lane-a"), ScriptedLaneFeed("lane-b")]
    return make_app(config("lane-a", "lane-b"), lanes, ScriptedLedgerFeed(), clocks=fixed_clocks())


@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
def test_a_running_card(snap_compare: SnapCompare, size: tuple[int, int]) -> None:
    running_card("BR3-A2", 754.0)
    assert snap_compare(cockpit(), terminal_size=size, run_before=settle)


def test_the_cards_screen_comparing_two_cards(snap_compare: SnapCompare) -> None:
    two_kept_cards()

    async def compared(pilot: Pilot[None]) -> None:
        await settle(pilot)
        await pilot.press("B")
        await settle(pilot)
        await pilot.press("space", "down", "space")
        await pilot.pause()

    assert snap_compare(cockpit(), terminal_size=(160, 48), run_before=compared)
