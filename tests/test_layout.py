"""The pane layout in a small and a large terminal: what fits, what fills, what overlaps."""

from __future__ import annotations

import itertools

import pytest
from textual.geometry import Region

from cockpit.app import CockpitApp, make_app
from cockpit.widgets.cache_gauge import hits_of_queries
from cockpit.widgets.columns import column_widths, fill_height
from tests.test_app import settle
from tests.test_app_feeds import ScriptedLaneFeed, ScriptedLedgerFeed, config, fixed_clocks

PANES = ("cache", "prefill", "phases", "roofline", "ratios", "spend")
FIRST_SCREEN = ("cache", "prefill", "phases", "roofline")
"""Prefill first: these four must be on screen at 80×24 without scrolling."""


def test_column_widths_fill_the_width_with_gaps() -> None:
    assert column_widths(77, 2, 1) == [38, 38]
    assert column_widths(157, 3, 1) == [52, 52, 51]
    for width, columns in itertools.product(range(20, 200, 7), (1, 2, 3)):
        widths = column_widths(width, columns, 1)
        assert sum(widths) + columns - 1 == width
        assert max(widths) - min(widths) <= 1


def test_fill_height_takes_the_room_left_within_limits() -> None:
    assert fill_height(room=8, visible=22, low=7, high=40) == 8
    assert fill_height(room=60, visible=80, low=7, high=40) == 40
    # No room left in the column (one column, say): half the screen, at least the minimum.
    assert fill_height(room=-5, visible=28, low=7, high=40) == 14
    assert fill_height(room=3, visible=10, low=7, high=None) == 7


def test_hits_and_queries_each_carry_their_own_prefix() -> None:
    assert hits_of_queries(571_000, 1_040_000) == "571 k / 1.04 M"
    assert hits_of_queries(6_720_000, 7_284_000) == "6.72 M / 7.28 M"
    assert hits_of_queries(12_300_000, 123_400_000) == "12.3 M / 123 M"
    assert hits_of_queries(999_000_000, 1_200_000_000) == "999 M / 1.2 G"
    assert hits_of_queries(13_464, 15_134) == "13,464 / 15,134"


def regions(app: object) -> dict[str, Region]:
    return {name: app.query_one(f"#{name}").region for name in PANES}  # type: ignore[attr-defined]


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (160, 48), (200, 60)])
async def test_no_pane_overlaps_another(size: tuple[int, int]) -> None:
    app = make_app(
        config("lane-a"), [ScriptedLaneFeed()], ScriptedLedgerFeed(), clocks=fixed_clocks()
    )
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        placed = app.query_one("#panes").children
        boxes = [widget.virtual_region for widget in placed]
        for one, other in itertools.combinations(boxes, 2):
            assert not one.overlaps(other), (one, other)


async def test_the_prefill_first_panes_fit_80x24_and_the_roofline_keeps_its_caption() -> None:
    app = make_app(
        config("lane-a"), [ScriptedLaneFeed()], ScriptedLedgerFeed(), clocks=fixed_clocks()
    )
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        body = app.query_one("#body").region
        for name, region in regions(app).items():
            if name in FIRST_SCREEN:
                assert body.contains_region(region), f"{name} {region} outside {body}"
        roofline = app.query_one("#roofline")
        assert roofline.has_class("-text-only")
        caption = str(app.query_one("#roofline-caption").render())
        assert "P " in caption and "D " in caption


async def test_the_roofline_fills_its_column_at_160x48() -> None:
    app = make_app(
        config("lane-a"), [ScriptedLaneFeed()], ScriptedLedgerFeed(), clocks=fixed_clocks()
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        body = app.query_one("#body").region
        placed = regions(app)
        column = [r for r in placed.values() if r.x == placed["roofline"].x]
        assert max(r.bottom for r in column) == body.bottom
        assert not app.query_one("#roofline").has_class("-text-only")


async def test_three_columns_at_120x36_still_draw_the_roofline_plot() -> None:
    """A 120-column pane (tmux split beside a benchmark) leaves the roofline ~39 cells wide:
    enough for the plot, which must not give way to an empty box."""
    app = make_app(
        config("lane-a"), [ScriptedLaneFeed()], ScriptedLedgerFeed(), clocks=fixed_clocks()
    )
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        roofline = app.query_one("#roofline")
        assert roofline.outer_size.width < 40
        assert not roofline.has_class("-text-only")
        plot = app.query_one("#roofline-plot")
        assert plot.display and plot.size.height >= 10


async def test_the_panes_are_styled_at_the_breakpoints_column_count_before_mount() -> None:
    """The breakpoint classes are on the screen before the panes mount, so the panes get
    their styles once, at three columns, not at two and again when the classes change."""
    columns_at_mount: list[int | None] = []

    class Watched(CockpitApp):
        def on_mount(self) -> None:
            columns_at_mount.append(self.query_one("#panes").styles.grid_size_columns)
            super().on_mount()

    app = Watched(
        config("lane-a"), [ScriptedLaneFeed()], ScriptedLedgerFeed(), clocks=fixed_clocks()
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert columns_at_mount == [3]


async def test_the_first_paint_is_at_the_breakpoints_column_count() -> None:
    """Breakpoint classes are set before the first layout: the roofline is drawn once, at
    three columns (Textual would set them on the first resize, after a paint at two)."""
    from cockpit.widgets.roofline import _RoofPlot

    app = make_app(
        config("lane-a"), [ScriptedLaneFeed()], ScriptedLedgerFeed(), clocks=fixed_clocks()
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        assert app.screen.has_class("-wide-three-columns")
        assert not app.screen.has_class("-two-columns")
        assert app.query_one("#panes").styles.grid_size_columns == 3
        assert app.query_one(_RoofPlot)._generation == 1
