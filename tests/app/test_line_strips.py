"""A line drawn straight from its pieces is the very strip Textual's layout of it draws: the same
text, styles (theme variables, dim when stale) and offsets, for every kind of line."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.content import Content
from textual.strip import Strip
from textual.visual import Visual

from cockpit.themes import THEMES
from cockpit.widgets.pane import (
    Bar,
    Cells,
    Line,
    LinesWidget,
    Note,
    Pane,
    Row,
    Segment,
    Spark,
    fits_directly,
)
from cockpit.widgets.roofline import RooflinePane
from cockpit.widgets.status import StatusLine
from cockpit.widgets.vitals import PackedLine

CONTROL = "a\x1b[2Jb\x07\tc\nd"
"""Control characters from outside: shown as symbols (no newline or tab is left)."""
WIDE = "模型 名前 🚀"

LINES: tuple[Line, ...] = (
    Row("hit rate", "87.5%", "good"),
    Row("TTFT p95", "1.2 s", "bad", stale=True),
    Row("alarm", "DOWN", "alarm"),
    Row(WIDE, "42"),
    Row(CONTROL, CONTROL, "warn"),
    Row("a label much longer than any pane is wide, and then longer still", "42"),
    Row("muted", "—", "muted", stale=True, reason="why"),
    Bar((Segment(0.4, "good"), Segment(0.25, "warn", "▒")), "65% of KV"),
    Bar((Segment(0.7, "bad"),), "stale bar", stale=True),
    Bar((Segment(1.0, "primary"),), WIDE),
    Note("lane stale since 12:00:00 · refused", "warn"),
    Note(CONTROL),
    Note(WIDE, "accent"),
    Note("x" * 200),
    Cells("Inter-token", ("12 ms", "30 ms", "1.2 s"), short="ITL"),
    Cells("stale row", ("1", "2", "3"), "secondary", stale=True),
    Cells(WIDE, ("一二三", "4")),
    Spark("gen tok/s", (1.0, None, 3.0, 2.0, 5.0), "5,000", top=6.0),
    Spark("stale", (0.1, 0.5, None), "0.5", stale=True),
    Spark(WIDE, (), "—"),
)
WIDTHS = (12, 38, 46, 78)


class Lines(App[None]):
    def compose(self) -> ComposeResult:
        yield Pane(id="pane")
        yield StatusLine(id="status")
        yield PackedLine(id="packed")
        yield RooflinePane(id="roofline")  # its caption

    def on_mount(self) -> None:
        for theme in THEMES:
            self.register_theme(theme)


def laid_out(widget: LinesWidget, content: Content, width: int) -> Strip:
    strips = Visual.to_strips(widget, content, width, 1, widget.visual_style)
    return strips[0] if strips else Strip.blank(width, widget.visual_style.rich_style)


async def test_every_kind_of_line_draws_the_strip_textual_lays_out() -> None:
    app = Lines()
    async with app.run_test(size=(100, 30)) as pilot:
        direct = 0
        for theme in ("textual-dark", *(theme.name for theme in THEMES)):
            app.theme = theme
            await pilot.pause()
            for widget in app.query(LinesWidget):
                style = widget.visual_style
                assert widget.draws_directly(), widget
                for width in WIDTHS:
                    for line in LINES:
                        content = line.content(width)
                        drawn = widget.line_strip(content, width, style, direct=True)
                        assert drawn == laid_out(widget, content, width), (theme, line, width)
                        assert drawn.cell_length == laid_out(widget, content, width).cell_length
                        direct += fits_directly(content, width)
        assert direct > len(LINES)  # most lines fit: the direct way is the one compared


def test_a_line_that_does_not_fit_or_has_more_lines_is_left_to_textual() -> None:
    assert fits_directly(Content("12345"), 5)
    assert not fits_directly(Content("123456"), 5)
    assert not fits_directly(Content("模型"), 3)
    assert not fits_directly(Content("a\nb"), 10)
    assert not fits_directly(Content("a\tb"), 10)
    assert not fits_directly(Content(""), 10)
    assert not fits_directly(Content.styled("a", ".component-class"), 10)


async def test_a_widget_laid_out_otherwise_draws_its_lines_as_textual_does() -> None:
    app = Lines()
    async with app.run_test(size=(100, 30)) as pilot:
        pane = app.query_one(Pane)
        for rule, value in (("text_align", "right"), ("text_wrap", "wrap"), ("line_pad", 1)):
            setattr(pane.styles, rule, value)
            await pilot.pause()
            assert not pane.draws_directly()
            pane.styles.clear_rule(rule)
            await pilot.pause()
            assert pane.draws_directly()
