"""The key bar: the app's shown keys in one line, ^p palette when it fits, clicks run keys."""

from __future__ import annotations

from textual.content import Content

from cockpit.app import CockpitApp, make_app
from cockpit.widgets.keys import Key, KeyBar, bar_content
from tests.test_app import settle
from tests.test_app_feeds import ScriptedLaneFeed, ScriptedLedgerFeed, config, fixed_clocks

KEYS = [Key("w/W", "window", "next_window"), Key("q", "quit", "quit")]
PALETTE = Key("^p", "palette", "command_palette")


def app() -> CockpitApp:
    return make_app(
        config("lane-a"), [ScriptedLaneFeed()], ScriptedLedgerFeed(), clocks=fixed_clocks()
    )


def test_items_are_placed_where_a_click_finds_them() -> None:
    line, spans = bar_content(KEYS, PALETTE, 40)
    assert isinstance(line, Content) and line.cell_length == 40
    assert line.plain.startswith("w/W window q quit")
    assert line.plain.endswith("▏^p palette ")
    for start, end, key in spans:
        assert line.plain[start:end].lstrip("▏").startswith(key.display)
    assert [key.action for *_, key in spans] == ["next_window", "quit", "command_palette"]


def test_the_palette_is_left_out_when_it_does_not_fit() -> None:
    line, spans = bar_content(KEYS, PALETTE, 24)
    assert "palette" not in line.plain
    assert [key.action for *_, key in spans] == ["next_window", "quit"]


async def test_the_bar_shows_every_shown_binding_in_order() -> None:
    cockpit = app()
    async with cockpit.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        bar = cockpit.query_one(KeyBar)
        shown = [b for b in cockpit.BINDINGS if getattr(b, "show", True)]
        assert {key.action for key in bar.keys} == {b.action for b in shown}  # type: ignore[union-attr]
        assert [key.display for key in bar.keys][:3] == ["tab", "1-9", "w/W"]
        line = cockpit.screen._compositor.render_strips()[-1].text
        assert line.startswith("tab next 1-9 lane w/W window p pause")
        assert line.rstrip().endswith("▏^p palette")
        assert "q quit" in line


async def test_80_columns_keep_every_key_and_drop_the_palette() -> None:
    cockpit = app()
    async with cockpit.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        line = cockpit.screen._compositor.render_strips()[-1].text
        assert "? help q quit" in line and "palette" not in line


async def test_a_click_on_a_key_runs_it() -> None:
    cockpit = app()
    async with cockpit.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        line = cockpit.screen._compositor.render_strips()[-1].text
        window = cockpit.window
        await pilot.click(KeyBar, offset=(line.index("w/W") + 2, 0))
        await settle(pilot)
        assert cockpit.window != window
        await pilot.click(KeyBar, offset=(line.index("q quit") + 3, 0))
        await pilot.pause()
        assert cockpit.return_code == 0 and not cockpit.is_running
