"""A pane whose view changes in some lines (as many as before) repaints those lines alone,
and shows what a full render would."""

from __future__ import annotations

from typing import Any, Self

from textual.app import App, ComposeResult
from textual.geometry import Region

from cockpit.widgets.pane import Pane
from tests.support.pilot import full_render
from tests.support.screentext import screen_text
from tests.support.snapshots import figures_view


class Regions(Pane):
    """A pane noting the regions each refresh it asks for names (none: all of it)."""

    BORDER_TITLE = "regions"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.asked: list[tuple[Region, ...]] = []
        super().__init__(*args, **kwargs)

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        self.asked.append(regions)
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)


class OnePane(App[None]):
    def compose(self) -> ComposeResult:
        yield Regions(id="pane")


async def test_only_the_changed_lines_are_repainted() -> None:
    app = OnePane()
    async with app.run_test(size=(60, 14)) as pilot:
        pane = app.query_one(Regions)
        pane.view = figures_view(["1", "2", "3", "4"])
        await pilot.pause()
        pane.asked.clear()
        pane.view = figures_view(["1", "2", "30", "4"])
        await pilot.pause()
        width = pane.content_size.width
        assert pane.asked == [(Region(0, 2, width, 1),)]
        shown = screen_text(app)
        assert "30 │" in shown and shown == await full_render(app, pilot)
