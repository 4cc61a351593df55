"""A pane repaints only the lines a new view changed, and the screen still shows the new view."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.pilot import Pilot

from cockpit.model import FRESH, Freshness
from cockpit.widgets.pane import Bar, Note, Pane, PaneView, Row, Segment


class Boxed(Pane):
    TITLE = "boxed"


class OnePane(App[None]):
    def compose(self) -> ComposeResult:
        yield Boxed(id="pane")


def view(values: list[str], stale: bool = False) -> PaneView:
    fresh = Freshness("stale", since=0.0, reason="down") if stale else FRESH
    rows = tuple(Row(f"figure {i}", value, stale=stale) for i, value in enumerate(values))
    bar = Bar((Segment(0.25, "good"), Segment(0.5, "warn")), caption=values[0])
    return PaneView((*rows, bar, Note("note")), sources=(("lane", fresh),))


async def full_render(app: OnePane, pilot: Pilot[None]) -> str:
    """The screen after every widget is redrawn from scratch."""
    for widget in app.screen.walk_children():
        widget.refresh()
    await pilot.pause()
    return app.export_screenshot()


async def test_changed_lines_only_and_the_screen_matches_a_full_render() -> None:
    app = OnePane()
    async with app.run_test(size=(60, 14)) as pilot:
        pane = app.query_one(Boxed)
        pane.view = view(["1", "2", "3", "4"])
        await pilot.pause()
        dirty: list[int] = []
        original = pane.refresh

        def spy(*regions, **options):  # type: ignore[no-untyped-def]
            dirty.extend(region.y for region in regions)
            return original(*regions, **options)

        pane.refresh = spy  # type: ignore[method-assign]
        pane.view = view(["1", "2", "30", "4"])
        await pilot.pause()
        assert dirty == [2]  # the third row only
        partial = app.export_screenshot()
        assert "30" in partial
        pane.refresh = original  # type: ignore[method-assign]
        assert partial == await full_render(app, pilot)
        for values, stale in ((["9", "2", "30", "4"], False), (["9", "2", "30", "4"], True)):
            pane.view = view(values, stale)
            await pilot.pause()
            partial = app.export_screenshot()
            assert partial == await full_render(app, pilot)


async def test_another_number_of_lines_lays_out_again() -> None:
    app = OnePane()
    async with app.run_test(size=(60, 14)) as pilot:
        pane = app.query_one(Boxed)
        pane.view = view(["1", "2"])
        await pilot.pause()
        short = pane.outer_size.height
        pane.view = view(["1", "2", "3", "4"])
        await pilot.pause()
        assert pane.outer_size.height == short + 2
        assert app.export_screenshot().count("figure") == 4
