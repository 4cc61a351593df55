"""A pane redraws only when its view changes, lays out only when its height does, and shows
outside text (names, reasons) as the text it is: no markup, no control characters."""

from __future__ import annotations

from dataclasses import replace
from typing import Self

from textual.app import App, ComposeResult
from textual.geometry import Region

from cockpit.core.model import Figure, Freshness
from cockpit.core.text import visible
from cockpit.widgets.pane import Bar, Note, Pane, PaneView, Row, Segment
from cockpit.widgets.status import SourceStatus, StatusLine, StatusView, status_lines
from tests.support.pilot import Counting, full_render
from tests.support.screentext import screen_text
from tests.support.snapshots import figures_view


class Boxed(Pane, Counting):
    BORDER_TITLE = "boxed"


class OnePane(App[None]):
    def compose(self) -> ComposeResult:
        yield Boxed(id="pane")

    @property
    def pane(self) -> Boxed:
        return self.query_one(Boxed)


async def test_an_equal_view_draws_nothing_and_a_new_one_redraws_without_layout() -> None:
    app = OnePane()
    async with app.run_test(size=(60, 14)) as pilot:
        pane = app.pane
        pane.view = figures_view(["1", "2", "3", "4"])
        await pilot.pause()
        pane.refreshes.clear()
        pane.view = figures_view(["1", "2", "3", "4"])  # equal, another object
        await pilot.pause()
        assert pane.refreshes == []
        pane.view = figures_view(["1", "2", "30", "4"])
        await pilot.pause()
        assert pane.refreshes == [False]
        shown = screen_text(app)
        assert "figure 2" in shown and "30 │" in shown
        assert shown == await full_render(app, pilot)


async def test_a_figure_that_moved_without_changing_its_text_redraws_nothing() -> None:
    app = OnePane()
    async with app.run_test(size=(60, 14)) as pilot:
        pane = app.pane

        def view(value: float, text: str) -> PaneView:
            figure = Figure("rate", "rate", value, "tok/s")
            return PaneView((Row("rate", text, figure=figure), Note("note")))

        pane.view = view(5.001, "5.0")
        await pilot.pause()
        pane.refreshes.clear()
        pane.view = view(5.002, "5.0")  # another figure, the same text: nothing to draw
        await pilot.pause()
        assert pane.refreshes == []
        row = pane.view.lines[0]
        assert isinstance(row, Row) and row.figure is not None and row.figure.value == 5.002
        pane.view = view(5.1, "5.1")
        await pilot.pause()
        assert pane.refreshes == [False]
        assert "5.1" in screen_text(app) and screen_text(app) == await full_render(app, pilot)


async def test_a_bar_that_fills_the_same_cells_redraws_nothing() -> None:
    app = OnePane()
    async with app.run_test(size=(60, 14)) as pilot:
        pane = app.pane

        def view(fraction: float) -> PaneView:
            return PaneView((Bar((Segment(fraction, "good"),), "hit"), Note("note")))

        pane.view = view(0.92251)
        await pilot.pause()
        full = screen_text(app).count("█")
        pane.refreshes.clear()
        pane.view = view(0.92250)  # a finer fraction than one of its cells: the same drawing
        await pilot.pause()
        assert pane.refreshes == []
        pane.view = view(0.5)
        await pilot.pause()
        assert pane.refreshes == [False]
        assert 0 < screen_text(app).count("█") < full
        assert screen_text(app) == await full_render(app, pilot)


async def test_stale_values_and_a_border_note_show_as_a_full_render_would() -> None:
    app = OnePane()
    async with app.run_test(size=(60, 14)) as pilot:
        pane = app.pane
        for values, stale in ((["9", "2", "30", "4"], False), (["9", "2", "30", "4"], True)):
            pane.view = figures_view(values, stale)
            await pilot.pause()
            shown = screen_text(app)
            assert ("lane stale" in shown) is stale
            assert shown == await full_render(app, pilot)


async def test_another_number_of_lines_lays_out_again() -> None:
    app = OnePane()
    async with app.run_test(size=(60, 14)) as pilot:
        pane = app.pane
        pane.view = figures_view(["1", "2"])
        await pilot.pause()
        short = pane.outer_size.height
        pane.refreshes.clear()
        pane.view = figures_view(["1", "2", "3", "4"])
        await pilot.pause()
        assert True in pane.refreshes
        assert pane.outer_size.height == short + 2
        assert screen_text(app).count("figure") == 4


async def test_a_bar_whose_caption_does_not_fit_keeps_four_cells_and_is_cut() -> None:
    app = OnePane()
    async with app.run_test(size=(24, 8)) as pilot:
        bar = Bar((Segment(0.5, "good"),), "a caption far too long for a bar this narrow")
        app.pane.view = PaneView((bar,))
        await pilot.pause()
        (line,) = [row for row in screen_text(app).splitlines() if "░" in row]
        assert line == "│ ██░░ a caption far t │"


async def test_a_label_too_long_is_shortened_and_the_value_kept() -> None:
    app = OnePane()
    async with app.run_test(size=(40, 8)) as pilot:
        app.pane.view = PaneView((Row("a label much longer than the pane is wide", "42"),))
        await pilot.pause()
        (line,) = [row for row in screen_text(app).splitlines() if "42" in row]
        assert line == "│ a label much longer than the pan… 42 │"


MARKUP = "a [/x] b [bold red]x[/ c [link=http://x]y[/link]"


async def test_text_like_markup_is_shown_as_it_is() -> None:
    """A reason or name that looks like markup: no MarkupError, the same characters on screen,
    in the border and in the tooltip."""
    failing = Freshness("missing", reason=MARKUP)
    markup_view = PaneView(
        (Row(MARKUP, "1"), Row("why", "—", reason=MARKUP), Note(MARKUP), Bar((), MARKUP)),
        sources=(("lane", failing),),
    )
    app = OnePane()
    async with app.run_test(size=(120, 10)) as pilot:
        pane = app.pane
        pane.view = markup_view
        await pilot.pause()
        shown = screen_text(app)
        assert shown.count(MARKUP) == 4  # the label, the note, the bar's caption, the border
        assert f"lane missing: {MARKUP}" in shown
        tooltip = pane.tooltip
        assert tooltip is not None and f"why: {MARKUP}" in str(tooltip)


async def test_control_characters_from_outside_are_shown_not_sent() -> None:
    """An escape sequence in a name would move the cursor or set the terminal's title."""
    name = "lane\x1b]0;pwned\x07\x1b[2J\x9b1m"
    assert visible(name) == "lane␛]0;pwned␇␛[2J�1m"
    app = OnePane()
    async with app.run_test(size=(80, 8)) as pilot:
        app.pane.view = PaneView(
            (Row(name, "1"), Note(name)), sources=(("lane", Freshness("missing", reason=name)),)
        )
        await pilot.pause()
        shown = screen_text(app)
        assert shown.count(visible(name)) == 3
        assert "\x1b" not in shown and "\x07" not in shown


class CountedStatus(StatusLine):
    """The status line, noting the regions of each refresh it asks for."""

    def __init__(self) -> None:
        super().__init__(id="status")
        self.regions: list[tuple[Region, ...]] = []

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        self.regions.append(regions)
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)


class OneStatus(App[None]):
    def compose(self) -> ComposeResult:
        yield CountedStatus()


async def test_a_status_line_whose_clock_alone_moved_repaints_that_line_only() -> None:
    sources = tuple(SourceStatus(f"source-{n}", Freshness("ok"), 0.05) for n in range(4))
    view = StatusView("lane-a", 1, 1, "1h", evaluated_at=0.0, sources=sources)
    app = OneStatus()
    async with app.run_test(size=(60, 8)) as pilot:
        status = app.query_one(CountedStatus)
        status.show(view)
        await pilot.pause()
        lines = [line.plain for line in status_lines(view, status.size.width)]
        assert len(lines) > 1  # so that "that line only" can fail
        status.regions.clear()
        status.show(replace(view))  # equal: nothing
        assert status.regions == []
        status.show(replace(view, evaluated_at=1.0))
        await pilot.pause()
        clock_row = next(y for y, line in enumerate(lines) if "at 00:00:00 UTC" in line)
        assert status.regions == [(Region(0, clock_row, status.size.width, 1),)]
        shown = screen_text(app)
        assert "at 00:00:01 UTC" in shown and shown == await full_render(app, pilot)
