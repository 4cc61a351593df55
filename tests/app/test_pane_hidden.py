"""A pane that is hidden (folded, or off at this width) builds no view from what it is shown;
shown again, it builds the view of the last read it was given. The same read again builds
nothing."""

from __future__ import annotations

from textual.app import App, ComposeResult

from cockpit.widgets.offload import OffloadPane
from cockpit.widgets.pane import Note, Pane, PaneView
from tests.support.screentext import screen_text


def said(text: str) -> PaneView:
    return PaneView((Note(text),))


class Built(Pane):
    BORDER_TITLE = "built"
    builds: list[str]

    def build(self, text: str) -> PaneView:  # type: ignore[override]
        self.builds.append(text)
        return said(text)


class OnePane(App[None]):
    CSS = "Screen.-folded #pane { display: none; }"

    def compose(self) -> ComposeResult:
        pane = Built(id="pane")
        pane.builds = []
        yield pane

    @property
    def pane(self) -> Built:
        return self.query_one(Built)


async def test_a_folded_pane_builds_nothing_until_it_is_shown_again() -> None:
    app = OnePane()
    async with app.run_test(size=(60, 10)) as pilot:
        pane = app.pane
        pane.show("first")
        app.screen.set_class(True, "-folded")
        pane.show("second")
        pane.show("third")
        await pilot.pause()
        assert pane.builds == ["first"]
        assert pane.view == said("first")
        app.screen.set_class(False, "-folded")
        pane.show("fourth")  # unfolded before it is shown: built at once
        assert pane.builds == ["first", "fourth"]


async def test_a_pane_hidden_by_the_layout_builds_its_last_read_when_it_appears() -> None:
    app = OnePane()
    async with app.run_test(size=(60, 10)) as pilot:
        pane = app.pane
        app.screen.set_class(True, "-folded")
        pane.show("first")
        pane.show("last")
        await pilot.pause()
        assert pane.builds == []
        app.screen.set_class(False, "-folded")  # as a breakpoint's class does on a resize
        await pilot.pause()
        await pilot.pause()
        assert pane.builds == ["last"]
        assert "last" in screen_text(app)


def test_the_offload_pane_builds_while_hidden_since_its_view_decides_whether_it_shows() -> None:
    assert OffloadPane.builds_hidden
    assert not Pane.builds_hidden


async def test_a_pane_shown_the_same_read_again_builds_nothing() -> None:
    app = OnePane()
    async with app.run_test(size=(60, 10)):
        pane = app.pane
        first, again = "first read", "".join(["first", " read"])  # equal, another object
        pane.show(first)
        pane.show(first)
        assert pane.builds == [first]
        pane.show(again)
        pane.show(text=again)
        assert pane.builds == [first, again, again]
