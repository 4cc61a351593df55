"""Small terminals and a resize storm: every pane's border whole, every figure whole, no error.

Read from the rendered screen itself: each fully visible pane's four corners and sides are in
place, and each `label … value` row ends with the figure's full formatted value, so a number
cut mid-way (or text drawn over another pane) fails.
"""

from __future__ import annotations

import random

import pytest

from cockpit.app.app import MIN_HEIGHT, MIN_WIDTH, CockpitApp, make_app
from tests.support.feeds import ScriptedLaneFeed, ScriptedLedgerFeed, config
from tests.support.pilot import check_screen, screen_lines
from tests.support.screentext import screen_text


def error_toasts(app: CockpitApp) -> bool:
    """An error notification is on screen (its title)."""
    text = screen_text(app)
    return any(title in text for title in ("refresh failed", "export failed", "Error"))


def make() -> CockpitApp:
    return make_app(
        config("lane-a", "lane-b"), [ScriptedLaneFeed("lane-a"), ScriptedLaneFeed("lane-b")],
        ScriptedLedgerFeed(),
    )  # fmt: skip


async def settled(app: CockpitApp, pilot: object) -> None:
    await pilot.pause()  # type: ignore[attr-defined]
    for _ in range(100):
        if app.lane_snapshot is not None and app.ledger_snapshot is not None:
            break
        await pilot.pause(0.01)  # type: ignore[attr-defined]
    await pilot.pause()  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", [(80, 24), (60, 20), (40, 12), (120, 40), (200, 60)])
async def test_each_size_draws_whole_panes_and_whole_figures(size: tuple[int, int]) -> None:
    app = make()
    async with app.run_test(size=size, notifications=True) as pilot:
        await settled(app, pilot)
        assert not app.query_one("#too-small").display
        assert check_screen(app) >= 1
        for key in ("w", "2", "t"):
            await pilot.press(key)
            await settled(app, pilot)
            app.clear_notifications()  # `t` says the theme in a toast over the panes
            await pilot.pause()
            check_screen(app)
        assert app.is_running
        assert not error_toasts(app)


@pytest.mark.parametrize(
    "size", [(MIN_WIDTH - 1, 24), (80, MIN_HEIGHT - 1), (20, 6), (MIN_WIDTH - 1, MIN_HEIGHT - 1)]
)
async def test_below_the_minimum_says_what_it_needs(size: tuple[int, int]) -> None:
    app = make()
    async with app.run_test(size=size) as pilot:
        await settled(app, pilot)
        text = "\n".join(screen_lines(app))
        needs = f"needs {MIN_WIDTH}×{MIN_HEIGHT}"
        assert needs in text.replace("\n", "") or needs in text, text
        assert not app.query_one("#body").display


async def test_a_resize_storm_ends_in_a_sound_screen() -> None:
    rng = random.Random(11)
    app = make()
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settled(app, pilot)
        for step in range(50):
            width, height = rng.randint(10, 220), rng.randint(4, 70)
            await pilot.resize_terminal(width, height)
            if step % 10 == 0 and width >= MIN_WIDTH and height >= MIN_HEIGHT:
                check_screen(app)
            if step % 20 == 0:
                await pilot.press("w")
        for size in ((40, 12), (80, 24), (60, 20)):
            await pilot.resize_terminal(*size)
            await settled(app, pilot)
            assert check_screen(app) >= 1
        assert app.is_running
        assert not error_toasts(app)
