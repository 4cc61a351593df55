"""The keys on the bottom line: every shown key fits 80 columns, a click on one runs it."""

from __future__ import annotations

import pytest
from screentext import screen_text
from textual.widgets import Footer

from cockpit.app import CockpitApp, make_app
from tests.test_app import on_screen, settle
from tests.test_app_feeds import ScriptedLaneFeed, ScriptedLedgerFeed, config, fixed_clocks

SHOWN = ("tab next", "1-9 lane", "w window", "r refresh", "p pause", "e export", "m model",
         "? help", "q quit")  # fmt: skip
"""The keys on the bottom line, in order; the others are in the help and the palette."""


def app() -> CockpitApp:
    return make_app(
        config("lane-a"), [ScriptedLaneFeed()], ScriptedLedgerFeed(), clocks=fixed_clocks()
    )


def bottom_line(cockpit: CockpitApp) -> str:
    rows = screen_text(cockpit).split("\n")
    assert len(rows) == cockpit.size.height
    return rows[-1]


@pytest.mark.parametrize("width", [80, 100, 160])
async def test_every_shown_key_is_on_the_bottom_line_in_order(width: int) -> None:
    cockpit = app()
    async with cockpit.run_test(size=(width, 24)) as pilot:
        await settle(pilot)
        await on_screen(pilot, "▏^p")  # the keys bar fills in a frame after the panes
        line = bottom_line(cockpit)
        places = [line.find(key) for key in SHOWN]
        assert -1 not in places, line
        assert places == sorted(places), line
        assert line.rstrip().endswith("▏^p"), line


async def test_a_click_on_a_key_runs_it() -> None:
    cockpit = app()
    async with cockpit.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await on_screen(pilot, "▏^p")  # the keys bar fills in a frame after the panes
        line = bottom_line(cockpit)
        window = cockpit.window
        await pilot.click(Footer, offset=(line.index("w window") + 2, 0))
        await settle(pilot)
        assert cockpit.window != window
        await pilot.click(Footer, offset=(line.index("q quit") + 3, 0))
        await pilot.pause()
        assert cockpit.return_code == 0 and not cockpit.is_running
