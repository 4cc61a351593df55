"""The pane layout from small to large terminals: columns, order, overlaps, heights."""

from __future__ import annotations

import itertools

import pytest

from cockpit.app.app import CockpitApp, make_app
from cockpit.app.screens import HelpScreen
from cockpit.widgets.cache_gauge import hits_of_queries
from cockpit.widgets.pane import Pane
from tests.support.feeds import ScriptedLaneFeed, ScriptedLedgerFeed, config, fixed_clocks
from tests.support.pilot import settle

PANES = ("cache", "prefill", "phases", "tails", "trends", "roofline", "ratios", "spend")


def test_hits_and_queries_each_carry_their_own_prefix() -> None:
    assert hits_of_queries(571_000, 1_040_000) == "571 k / 1.04 M"
    assert hits_of_queries(6_720_000, 7_284_000) == "6.72 M / 7.28 M"
    assert hits_of_queries(12_300_000, 123_400_000) == "12.3 M / 123 M"
    assert hits_of_queries(999_000_000, 1_200_000_000) == "999 M / 1.2 G"
    assert hits_of_queries(13_464, 15_134) == "13,464 / 15,134"


def cockpit() -> CockpitApp:
    return make_app(
        config("lane-a"), [ScriptedLaneFeed()], ScriptedLedgerFeed(), clocks=fixed_clocks()
    )


@pytest.mark.parametrize(
    ("size", "columns"),
    [((40, 12), 1), ((79, 30), 1), ((80, 24), 2), ((100, 30), 2), ((120, 36), 3), ((200, 60), 3)],
)
async def test_panes_read_across_in_columns_by_width_and_never_overlap(
    size: tuple[int, int], columns: int
) -> None:
    app = cockpit()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        boxes = [app.query_one(f"#{name}").virtual_region for name in PANES]
        for one, other in itertools.combinations(boxes, 2):
            assert not one.overlaps(other), (one, other)
        assert len({box.x for box in boxes}) == columns
        # Prefill first, reading across: each pane after the one before it, row by row.
        for before, after in itertools.pairwise(boxes):
            assert (after.y, after.x) > (before.y, before.x), (before, after)


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_no_pane_is_taller_than_what_it_shows(size: tuple[int, int]) -> None:
    app = cockpit()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        for pane in app.query(Pane):
            if pane.display:
                assert pane.outer_size.height == len(pane.view.lines) + 2, pane.id  # + borders


async def test_the_first_row_is_whole_at_80x24() -> None:
    app = cockpit()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        body = app.query_one("#body").region
        for name in ("cache", "prefill"):
            assert body.contains_region(app.query_one(f"#{name}").region), name


@pytest.mark.parametrize("size", [(80, 24), (120, 36), (160, 48)])
async def test_the_roofline_draws_its_plot(size: tuple[int, int]) -> None:
    app = cockpit()
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        assert not app.query_one("#roofline").has_class("-text-only")
        plot = app.query_one("#roofline-plot")
        assert plot.display and plot.size.height >= 10


async def test_a_resize_under_the_help_lays_the_panes_out_for_the_new_width() -> None:
    app = cockpit()
    async with app.run_test(size=(160, 48)) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.resize_terminal(100, 30)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await settle(pilot)
        boxes = [app.query_one(f"#{name}").region for name in PANES]
        assert len({box.x for box in boxes}) == 2
        await pilot.resize_terminal(160, 48)
        await settle(pilot)
        boxes = [app.query_one(f"#{name}").region for name in PANES]
        assert len({box.x for box in boxes}) == 3
