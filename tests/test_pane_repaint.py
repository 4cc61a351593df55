"""A pane repaints only the lines a new view changed, and the screen still shows the new view."""

from __future__ import annotations

from collections.abc import AsyncIterator

from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.strip import Strip
from textual.style import Style

from cockpit.model import FRESH, Freshness
from cockpit.widgets.pane import Bar, Line, Note, Pane, PaneView, Row, Segment


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


class ThemedPane(App[None]):
    def compose(self) -> ComposeResult:
        yield Boxed(id="pane")


COMPARED_THEMES = ("textual-dark", "textual-light")


async def each_theme(app: App[None], pilot: Pilot[None], pane: Pane) -> AsyncIterator[Style]:
    """The pane's style in each compared theme, once the theme is applied."""
    for theme in COMPARED_THEMES:
        app.theme = theme
        await pilot.pause()
        yield pane.visual_style


def assert_drawn_as_textual_would(
    pane: Pane, direct: Strip | None, line: Line, width: int, style: Style
) -> None:
    """`direct` has the segments, styles and offsets of Textual's own drawing of `line`."""
    from textual.visual import Visual

    from cockpit.widgets.pane import render_line

    assert direct is not None
    (textual,) = Visual.to_strips(pane, render_line(line, width), width, 1, style)
    assert list(direct) == list(textual)
    assert direct.cell_length == textual.cell_length == width


async def test_a_row_drawn_directly_is_the_strip_textual_would_draw() -> None:
    """The direct path for rows gives the same segments, styles and offsets as Textual's own
    rendering of the row's Content, in every tone, stale or not, in two themes."""
    from cockpit.widgets.pane import TONE_STYLE

    app = ThemedPane()
    async with app.run_test(size=(70, 10)) as pilot:
        pane = app.query_one(Boxed)
        compared = 0
        async for style in each_theme(app, pilot, pane):
            for tone in TONE_STYLE:
                for stale in (False, True):
                    for label, value in (("Prompts ≤ 512 tok", "12.5%"), ("", "—"), ("a", "日本")):
                        for width in (pane.size.width, 24):
                            row = Row(label, value, tone, stale)  # type: ignore[arg-type]
                            direct = pane._row_strip(row, width, style)
                            assert_drawn_as_textual_would(pane, direct, row, width, style)
                            compared += 1
        assert compared == 2 * len(TONE_STYLE) * 2 * 3 * 2


async def test_a_bar_drawn_directly_is_the_strip_textual_would_draw() -> None:
    """The direct path for bars gives the same segments, styles and offsets as Textual's own
    rendering of the bar's Content: tones, stale, empty and full, captions, two themes."""
    from cockpit.widgets.pane import TONE_STYLE

    tones = list(TONE_STYLE)
    bars = [
        Bar((Segment(0.62, "good"), Segment(0.25, "warn")), "62% hit"),
        Bar((Segment(0.0, "bad"),), ""),
        Bar((Segment(1.0, "accent", "▓"),), "all of it"),
        Bar(tuple(Segment(0.2, tone) for tone in tones[:5]), "queue · prefill · decode"),
        Bar((Segment(0.5, "plain"), Segment(0.5, "plain")), "日本 caption"),
    ]
    app = ThemedPane()
    async with app.run_test(size=(70, 10)) as pilot:
        pane = app.query_one(Boxed)
        compared = 0
        async for style in each_theme(app, pilot, pane):
            for bar in bars:
                for stale in (False, True):
                    line = Bar(bar.segments, bar.caption, stale)
                    for width in (pane.size.width, 30):
                        direct = pane._bar_strip(line, width, style)
                        assert_drawn_as_textual_would(pane, direct, line, width, style)
                        compared += 1
        assert compared == 2 * len(bars) * 2 * 2


async def test_a_bar_whose_caption_does_not_fit_takes_textuals_path() -> None:
    app = OnePane()
    async with app.run_test(size=(40, 8)) as pilot:
        pane = app.query_one(Boxed)
        bar = Bar((Segment(0.5, "good"),), "a caption far too long for a bar this narrow")
        assert pane._bar_strip(bar, 20, pane.visual_style) is None
        pane.view = PaneView((bar,))
        await pilot.pause()
        drawn = pane.render_line(0)
        assert drawn.cell_length == pane.size.width
        assert drawn.text.startswith("██░░ a caption far")  # four cells at least, then cut


async def test_a_label_too_long_takes_textuals_path_and_is_shortened() -> None:
    app = OnePane()
    async with app.run_test(size=(40, 8)) as pilot:
        pane = app.query_one(Boxed)
        long = Row("a label much longer than the pane is wide", "42")
        assert pane._row_strip(long, pane.size.width, pane.visual_style) is None
        pane.view = PaneView((long,))
        await pilot.pause()
        line = app.export_screenshot()
        assert "…" in line and "42" in line
