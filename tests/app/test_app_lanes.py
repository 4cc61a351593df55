"""What one lane's screens say about that lane: its own ledger models everywhere the ledger is
shown (panes, details, `l`, the receipt), the configured hit-rate threshold on the gauge, a
model's name as it is in a title, and `--lane NAME` opening on that lane among several."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from textual.content import Content
from textual.pilot import Pilot

from cockpit.app.app import CockpitApp, make_app
from cockpit.app.lifecycle import Setup, build_app
from cockpit.app.overview import FleetScreen
from cockpit.app.screens import DetailsScreen, LedgerTablesScreen
from cockpit.cli.fleet import fleet_feed
from cockpit.config.schema import Config, LaneConfig
from cockpit.core.health import Thresholds
from cockpit.widgets.trends import TrendsPane
from tests.support.feeds import (
    EVAL_AT,
    ScriptedLaneFeed,
    ScriptedLedgerFeed,
    config,
    fixed_clocks,
)
from tests.support.pilot import focus_pane, on_screen, settle

NARROWED = "narrowed to models qwen3-32b: the ledger's sums per source are not by model"
"""The ledger's `cli` and `cron` sources are not split by model: a narrowed lane says so."""


def qwen_lane(tmp_path: Path | None = None) -> CockpitApp:
    """lane-a serves qwen3-32b (`ledger_models:`); the ledger also holds claude-sonnet-4."""
    settings = replace(config(), lanes=(LaneConfig("lane-a", ledger_models=("qwen3-32b",)),))
    feeds = [ScriptedLaneFeed("lane-a")]
    clocks = fixed_clocks(wall=EVAL_AT)
    return make_app(settings, feeds, ScriptedLedgerFeed(), export_dir=tmp_path, clocks=clocks)


async def test_l_on_a_narrowed_lane_shows_its_own_models_and_why_no_source_rows() -> None:
    app = qwen_lane()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("l")
        await pilot.pause()
        assert isinstance(app.screen, LedgerTablesScreen)
        screen = await on_screen(pilot, "qwen3-32b", NARROWED[:40])
        assert "claude-sonnet-4" not in screen
        assert "per source: no sessions in the window" not in screen


async def test_the_tables_pane_of_a_narrowed_lane_says_why_it_has_no_source_rows() -> None:
    app = qwen_lane()
    async with app.run_test(size=(250, 70)) as pilot:
        await settle(pilot)
        screen = await on_screen(pilot, "Ledger tables", "narrowed to models qwen3-32b")
        assert "per source: no sessions in the window" not in screen


async def test_e_on_a_narrowed_lane_receipts_its_own_models_and_says_so(tmp_path: Path) -> None:
    app = qwen_lane(tmp_path)
    async with app.run_test(size=(160, 48), notifications=True) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        await on_screen(pilot, "receipt exported")
    (receipt,) = tmp_path.iterdir()
    text = receipt.read_text(encoding="utf-8")
    assert "The lane's own models only: qwen3-32b." in text
    assert f"Missing: {NARROWED}" in text
    assert "claude-sonnet-4" not in text


async def test_the_m_filter_narrows_the_ledger_tables_to_the_filtered_model() -> None:
    app = make_app(config("lane-a"), [ScriptedLaneFeed()], ScriptedLedgerFeed())
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("m")
        await pilot.pause()
        await pilot.press(*"Qwen/qwen3-32b", "enter")
        await settle(pilot)
        await pilot.press("l")
        await pilot.pause()
        screen = await on_screen(pilot, "qwen3-32b")
        assert "claude-sonnet-4" not in screen


async def gauge_text(pilot: Pilot[None]) -> str:
    return await on_screen(pilot, "Prefix cache", "prompts redone")


async def test_the_gauge_reads_low_under_the_configured_hit_rate_as_the_health_line_does() -> None:
    settings = replace(config("lane-a"), health=Thresholds(hit_rate=0.8))
    feed = ScriptedLaneFeed(changes={"prefix_cache_hits": 15_000_000.0})  # 75 %
    app = make_app(settings, [feed], None)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        screen = await gauge_text(pilot)
        assert "low: under 80%, prompts redone" in screen
        assert "70%" not in screen


async def test_the_details_title_reads_a_pane_title_with_brackets_as_the_border_shows_it() -> None:
    """No pane's title carries outside text today (the roofline's, with the model's id, opens
    no details): a bracket put in one reads in the details' title as in the pane's border."""
    app = make_app(config("lane-a"), [ScriptedLaneFeed()], None)
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        app.query_one(TrendsPane).border_title = Content("Trends · qwen [bold]")
        await on_screen(pilot, "Trends · qwen [bold]")
        await focus_pane(pilot, "trends")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, DetailsScreen)
        screen = await on_screen(pilot, "Trends · qwen [bold]: details")
        assert "\\[" not in screen


def listed_with_lane(settings: Config, feeds: list[ScriptedLaneFeed], lane: str) -> CockpitApp:
    """The cockpit as `cockpit --lane NAME` builds it for these lanes listed in the config."""
    setup = Setup(settings, feeds, None, fleet=fleet_feed(settings, feeds), lane=lane)
    return build_app(lambda: setup)


async def test_a_lane_named_on_the_command_line_opens_on_its_panes_escape_on_the_overview() -> None:
    feeds = [ScriptedLaneFeed(name) for name in ("lane-a", "lane-b", "lane-c")]
    app = listed_with_lane(config("lane-a", "lane-b", "lane-c"), feeds, "lane-b")
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert not isinstance(app.screen, FleetScreen)
        await on_screen(pilot, "lane-b", "Prefix cache")
        assert app.lane_name == "lane-b"
        assert [len(feed.reads) for feed in feeds] == [0, 1, 0]  # that lane alone is read
        await pilot.press("escape")
        await settle(pilot)
        assert isinstance(app.screen, FleetScreen)
        await on_screen(pilot, "3 lanes listed")
