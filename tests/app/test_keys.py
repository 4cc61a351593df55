"""The keys on the bottom line: every shown key fits 80 columns, a click on one runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Footer, OptionList

from cockpit.app.app import CockpitApp, make_app
from cockpit.app.screens import ModelFilterScreen
from cockpit.config.schema import Config, LaneConfig
from cockpit.core.text import visible
from tests.support.faultlane import (
    MODELS,
    QUOTED,
    lane_config,
    running_app,
    shared_lane_prometheus,
    wait_until,
)
from tests.support.feeds import ScriptedLaneFeed, ScriptedLedgerFeed, config, fixed_clocks
from tests.support.pilot import on_screen, settle
from tests.support.screentext import screen_text

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


# --- keys as htop and k9s users expect them -------------------------------------------------


async def test_ctrl_c_quits_even_from_the_model_filter_field() -> None:
    for keys in (("ctrl+c",), ("m", "ctrl+c")):
        cockpit = app()
        async with cockpit.run_test(size=(100, 30)) as pilot:
            await settle(pilot)
            await pilot.press(*keys)
            await pilot.pause()
            assert not cockpit.is_running, keys
        assert cockpit.return_code == 0


async def test_a_lane_key_beyond_the_lanes_says_how_many_there_are() -> None:
    feeds = [ScriptedLaneFeed("lane-a"), ScriptedLaneFeed("lane-b")]
    cockpit = make_app(config("lane-a", "lane-b"), feeds, None, clocks=fixed_clocks())
    async with cockpit.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("5")
        await on_screen(pilot, "no lane 5: 2 lanes configured")
        assert cockpit.lane_index == 0


async def test_t_says_which_theme_is_on() -> None:
    cockpit = app()
    async with cockpit.run_test(size=(100, 30), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("t")
        await on_screen(pilot, f"theme: {cockpit.theme}")
        assert cockpit.theme != "cockpit-dark"


# --- the model filter offers the lane's model names -----------------------------------------


async def choose_a_model_name(pilot: Pilot[None]) -> None:
    """`m` lists the lane's model names, each as typed; ↓ ↓ ↓ enter picks the third."""
    await pilot.press("m")
    assert isinstance(pilot.app.screen, ModelFilterScreen)
    options = pilot.app.screen.query_one(OptionList)
    await wait_until(pilot, lambda: options.option_count == len(MODELS))
    text = screen_text(pilot.app)
    assert all(visible(name) in text for name in MODELS), text  # a newline shows as ␊
    await pilot.press("down", "down", "down", "enter")
    await pilot.pause()
    assert not isinstance(pilot.app.screen, ModelFilterScreen)


async def test_m_offers_the_model_names_the_lane_has_on_prometheus(tmp_path: Path) -> None:
    _, server = shared_lane_prometheus(tmp_path)
    async with running_app(lane_config(server.url), size=(100, 40)) as (cockpit, pilot):
        await choose_a_model_name(pilot)
        assert sorted(MODELS)[2] == QUOTED
        assert cockpit.lane_feeds[0].model_filter == QUOTED  # the name itself, newline and all


async def test_m_offers_the_model_names_of_a_scraped_lane(tmp_path: Path) -> None:
    exporter, _ = shared_lane_prometheus(tmp_path)
    lane = LaneConfig("lane-s", metrics_url=f"http://{exporter.address}/metrics")
    settings = Config(source="<test>", lanes=(lane,), window="5m", refresh_s=60.0)
    async with running_app(settings, size=(100, 40)) as (cockpit, pilot):
        await choose_a_model_name(pilot)
        assert cockpit.lane_feeds[0].model_filter == QUOTED
