"""The roofline pane in a real Textual app (Pilot), at 80×24, 40×12 and 30×8, plus a snapshot.

The lane load is chosen so that the prefill point sits at exactly 25 % of its roof and the
decode point at exactly 50 % (worked out in tests/support/roofline.py from the seed's formulas).
"""

from __future__ import annotations

import math
from dataclasses import replace
from itertools import pairwise
from typing import Any

import pytest
from rich.text import Text
from textual.app import App
from textual.geometry import Size
from textual.selection import Selection
from textual.strip import Strip
from textual_plotext import PlotextPlot

from cockpit.roofline.model import LaneLoad, RooflineView, operating_points
from cockpit.roofline.profiles import find_hardware
from cockpit.widgets.roofline import RooflinePane, caption_at, caption_lines
from cockpit.widgets.roofplot import COLOURS, HOLD_STEPS, PlotSpec, RoofPlot, plot_spec
from tests.support.roofline import (
    BATCH,
    CEILING_TOK_S,
    CHUNK,
    FRESH,
    GENERATED,
    H100,
    LLAMA,
    LOAD,
    PEAK,
    PREFILL_FLOPS_PER_TOKEN,
    PROMPT,
    VIEW,
    CountedApp,
    PaneApp,
    mark_position,
    plot_area,
    plot_text,
)
from tests.support.screentext import screen_text


def test_the_load_puts_the_points_where_the_test_says() -> None:
    points = VIEW.points
    assert points is not None and points.prefill is not None and points.decode is not None
    assert round(points.prefill.pct_of_roof) == 25
    assert round(points.decode.pct_of_roof) == 50


async def test_pane_at_80x24_plots_and_captions_both_points() -> None:
    app = PaneApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        plot = app.query_one(PlotextPlot)
        assert plot.display and plot.size.height >= 10
        canvas = plot_area(app)
        assert "P" in canvas and "D" in canvas
        screen = screen_text(app)
        assert "Roofline · h100 · llama-3.1-8b" in screen
        assert "ridge 295" in screen
        assert "25% of roof" in screen
        assert "50% of roof" in screen
        assert f"ceiling {CEILING_TOK_S / 1e3:.2f}k tok/s at batch 8" in screen
        assert "FLOP/byte" in screen


def test_the_ceiling_names_the_mean_batch_it_was_worked_out_for() -> None:
    load = LaneLoad(running=3.5, mean_prompt=PROMPT, mean_generated=GENERATED, itl_s=0.02)
    points = operating_points(load, H100, LLAMA)
    assert points.decode is not None and points.decode.batch == 3.5
    lines = caption_lines(RooflineView(H100, LLAMA, points))
    assert any(line.endswith("at batch 3.5") for line in lines), lines
    compact = caption_lines(RooflineView(H100, LLAMA, points), compact=True)
    assert any(line.endswith("at B 3.5") for line in compact), compact


async def test_pane_at_40x12_keeps_a_plot_and_a_compact_caption() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        plot = app.query_one(PlotextPlot)
        assert plot.display and plot.size.height >= 4
        canvas = plot_area(app)
        assert "P" in canvas and "D" in canvas
        lines = screen_text(app).splitlines()
        assert any(line.startswith("│ P ") and "25%" in line for line in lines)
        assert any(line.startswith("│ D ") and "50%" in line for line in lines)
        assert any(f"ceiling {CEILING_TOK_S / 1e3:.2f}k tok/s" in line for line in lines)
        assert not any("…" in line for line in lines if line.startswith("│ P "))


async def test_pane_at_30x8_falls_back_to_text() -> None:
    app = PaneApp()
    async with app.run_test(size=(30, 8)) as pilot:
        await pilot.pause()
        assert not app.query_one(PlotextPlot).display
        screen = screen_text(app)
        assert "ridge 295" in screen
        assert "│ P " in screen and "25%" in screen
        assert "│ D " in screen and "50%" in screen
        assert "┤" not in screen  # no axes drawn


async def test_growing_the_terminal_brings_the_plot_back() -> None:
    app = PaneApp()
    async with app.run_test(size=(30, 8)) as pilot:
        await pilot.pause()
        assert not app.query_one(PlotextPlot).display
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert app.query_one(PlotextPlot).display
        assert "P" in plot_area(app)


async def test_an_equal_view_does_not_redraw_and_a_new_one_does() -> None:
    app = CountedApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        pane = app.pane
        plot = pane.plot
        before, plot.refreshes = plot_text(app), []
        same = RooflineView(H100, LLAMA, operating_points(LOAD, H100, LLAMA, chunk_tokens=CHUNK))
        pane.show(same)
        await pilot.pause()
        assert plot.refreshes == []
        pane.show(RooflineView(find_hardware("a100"), LLAMA, VIEW.points))
        await pilot.pause()
        assert plot.refreshes == [False]
        assert plot_text(app) != before  # the a100's roofs
        assert "Roofline · a100" in screen_text(app)
        assert "ridge 153" in screen_text(app)


MOVED = RooflineView(H100, LLAMA, operating_points(replace(LOAD, running=2 * BATCH), H100, LLAMA))
"""The view with its decode point elsewhere: the roofs alike."""


async def fresh_screen(view: RooflineView, size: tuple[int, int]) -> str:
    app = PaneApp(view)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        return screen_text(app)


async def test_a_plot_drawn_lately_is_shown_again_without_plotting_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plotted: list[object] = []
    render = RoofPlot.render
    app = PaneApp()

    def counted(plot: RoofPlot) -> Any:
        if plot.app is app:  # not the fresh apps compared with
            plotted.append(plot.spec())
        return render(plot)

    monkeypatch.setattr(RoofPlot, "render", counted)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        pane = app.query_one(RooflinePane)
        plotted.clear()  # the first plot at a size is plotted twice: it measures the canvas
        pane.show(MOVED)
        await pilot.pause()
        assert len(set(plotted)) == 1
        plotted.clear()
        for view in (VIEW, MOVED, VIEW):  # to and fro, as a lane's points go
            pane.show(view)
            await pilot.pause()
            assert screen_text(app) == await fresh_screen(view, (80, 24))
        assert plotted == []
        await pilot.resize_terminal(60, 20)  # another size: plotted afresh
        await pilot.pause()
        assert plotted != [] and screen_text(app) == await fresh_screen(VIEW, (60, 20))


async def test_the_plot_is_drawn_again_only_when_a_letter_moves(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The points sit on the cells of the canvas: a point that moves within its cell draws
    the same picture, and is not plotted again."""
    render = RoofPlot.render
    drawn: list[str] = []

    def recorded(plot: RoofPlot) -> Any:
        rendered = render(plot)
        assert isinstance(rendered, Text)
        drawn.append(rendered.plain)
        return rendered

    app = PaneApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        pane, plot = app.query_one(RooflinePane), app.query_one(RoofPlot)
        drawn.append(plot_text(app))
        monkeypatch.setattr(RoofPlot, "render", recorded)
        for step in range(1, 41):  # the decode point drifts right and up, a little each time
            load = replace(LOAD, running=BATCH * (1 + step / 40))
            pane.show(RooflineView(H100, LLAMA, operating_points(load, H100, LLAMA)))
            await pilot.pause()
        assert len(drawn) >= 4, "the decode point crosses a few cells"
        assert all(before != after for before, after in pairwise(drawn))
        assert plot.canvas is not None and plot.plotted is not None
        assert plot.plotted.grid == plot.canvas.grid


async def test_text_selected_over_the_plot_is_shown_and_then_cleared() -> None:
    app = PaneApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        plot = app.query_one(RoofPlot)

        def lines() -> list[Strip]:
            return [plot.render_line(y) for y in range(plot.size.height)]

        before = lines()
        app.screen.selections = {plot: Selection(None, None)}  # all of it
        await pilot.pause()
        assert lines() != before
        app.screen.selections = {}
        await pilot.pause()
        assert lines() == before


def colours(app: App[Any]) -> set[str]:
    """The colours the plot is drawn in."""
    rendered = app.query_one(PlotextPlot).render()
    assert isinstance(rendered, Text)
    return {str(span.style) for span in rendered.spans}


async def test_theme_change_redraws_in_the_new_theme() -> None:
    app = PaneApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        dark = colours(app)
        app.theme = "textual-light"
        await pilot.pause()
        assert colours(app) != dark
        assert "P" in plot_area(app)


@pytest.mark.parametrize("size", [(80, 24), (60, 20), (40, 12)])
async def test_the_letters_sit_where_the_operating_points_are(size: tuple[int, int]) -> None:
    points = VIEW.points
    assert points is not None and points.prefill is not None and points.decode is not None
    app = PaneApp()
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        plot, text = app.query_one(PlotextPlot), plot_text(app)
        rows = text.splitlines()
        cell_x = 4 / (plot.size.width - 6)  # 4 decades across the canvas
        cell_y = 3 / (len([row for row in rows if "┤" in row or "│" in row[:6]]) - 1)
        for letter, point in (("P", points.prefill), ("D", points.decode)):
            x, y = mark_position(text, letter)
            assert abs(x - math.log10(point.intensity)) <= cell_x, (letter, text)
            assert abs(y - math.log10(point.achieved_flops_per_s)) <= cell_y, (letter, text)


async def test_no_live_figures_draws_the_roof_alone() -> None:
    app = PaneApp(RooflineView(H100, LLAMA, None))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert "no live figures yet" in screen_text(app)
        assert "⠒" in plot_text(app) or "⠉" in plot_text(app)  # the braille roof


async def test_missing_points_say_why() -> None:
    load = LaneLoad(mean_prompt=PROMPT, mean_fresh_prefill=FRESH, running=BATCH)
    view = RooflineView(H100, LLAMA, operating_points(load, H100, LLAMA))
    app = PaneApp(view)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        screen = screen_text(app)
        assert "P — effective prefill rate missing" in screen
        assert "D — inter-token step missing" in screen


async def test_no_profile_says_so() -> None:
    app = PaneApp(None)
    async with app.run_test(size=(40, 12)) as pilot:
        await pilot.pause()
        assert "no hardware or model profile" in screen_text(app)


def test_snapshot_80x24(snap_compare: Any) -> None:
    assert snap_compare(PaneApp(), terminal_size=(80, 24))


def test_snapshot_40x12(snap_compare: Any) -> None:
    assert snap_compare(PaneApp(), terminal_size=(40, 12))


# --- a point above its roof: a profile that doesn't match the lane -----------------------------


def load_above_the_roof(times: float) -> LaneLoad:
    """LOAD with prefill `times` its roof: the 2,048-token chunk is compute bound, its roof the
    peak, so the rate is `times` the peak over the FLOPs per token."""
    return replace(LOAD, effective_prefill_rate=times * PEAK / PREFILL_FLOPS_PER_TOKEN)


def view_above_the_roof(times: float) -> RooflineView:
    load = load_above_the_roof(times)
    return RooflineView(H100, LLAMA, operating_points(load, H100, LLAMA, chunk_tokens=CHUNK))


def peak_row(canvas: list[str]) -> int:
    """The lowest canvas row the flat roof is drawn in: it runs to the right edge (braille)."""
    ends = [row.rstrip().rstrip("│")[-1:] for row in canvas]
    return max(y for y, end in enumerate(ends) if "\u2801" <= end <= "\u28ff")


WARNING = "above the roof: check the hardware/model profile"
SHORT_WARNING = "above roof: check hw/model profile"


def test_a_point_twice_its_roof_is_said_to_be_impossible() -> None:
    view = view_above_the_roof(2.0)
    wide = caption_lines(view)
    assert any(line.startswith("P ") and line.endswith("200% of roof") for line in wide), wide
    assert wide[-1].strip() == WARNING
    compact = caption_lines(view, compact=True)
    assert compact[-1].strip() == SHORT_WARNING


@pytest.mark.parametrize("width", [38, 39, 40, 55, 56, 80, 120])
def test_the_warning_fits_the_pane(width: int) -> None:
    """38 cells: two columns at 80; 39: three at 120; the border and padding take 4."""
    lines = caption_at(view_above_the_roof(2.0), Size(width, 24))
    assert lines[-1].strip() in (WARNING, SHORT_WARNING)
    assert len(lines[-1]) <= width - 4


def test_points_under_their_roof_carry_no_warning() -> None:
    lines = caption_lines(VIEW) + caption_lines(VIEW, compact=True)
    assert not any("roof:" in line for line in lines)


@pytest.mark.parametrize(
    ("size", "times", "rows_above"),
    [((80, 24), 2.0, 0), ((40, 12), 2.0, 0), ((80, 24), 7.67, 1)],
)
async def test_a_point_above_its_roof_stays_on_the_canvas_with_the_warning(
    size: tuple[int, int], times: float, rows_above: int
) -> None:
    """Twice the roof is less than a row above it on these canvases; 7.67 times (the 767 %
    seen with a small GPU's profile) is a row or more."""
    app = PaneApp(view_above_the_roof(times))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        assert app.query_one(PlotextPlot).display
        canvas = plot_area(app)
        assert "P" in canvas and "D" in canvas, canvas
        rows = canvas.splitlines()
        p_row = next(y for y, row in enumerate(rows) if "P" in row)
        assert p_row <= peak_row(rows) - rows_above, canvas
        screen = screen_text(app)
        assert f"{100 * times:.0f}%" in screen
        assert (WARNING if size[0] >= 56 else SHORT_WARNING) in screen
        assert "…" not in screen


def test_a_point_is_drawn_where_it_was_until_it_moves_past_the_hold() -> None:
    theme = {variable: "#808080" for variable in COLOURS.values()}
    pane, plot = Size(80, 20), Size(70, 16)
    fresh = plot_spec(VIEW, pane, plot, theme)
    x_lo, x_hi = fresh.axes[:2]
    step = (x_hi - x_lo) / (2 * plot.width)
    first, points = fresh.marks[0], VIEW.points
    assert first.letter == "P" and points is not None and points.prefill is not None
    exact = math.log10(points.prefill.intensity)

    def drawn_at(shift: float) -> PlotSpec:
        """The spec as if its prefill point had been drawn `shift` grid steps right of where
        it is."""
        moved = replace(first, x=exact + shift * step)
        return replace(fresh, marks=(moved, *fresh.marks[1:]))

    near, far = drawn_at(HOLD_STEPS - 0.05), drawn_at(HOLD_STEPS + 0.6)
    assert plot_spec(VIEW, pane, plot, theme, near) == near  # kept: no plot again
    assert plot_spec(VIEW, pane, plot, theme, far) == fresh  # moved on: placed afresh
    assert plot_spec(VIEW, pane, plot, theme, None) == fresh
    other_axes = replace(near, axes=(x_lo - 1, *near.axes[1:]))
    assert plot_spec(VIEW, pane, plot, theme, other_axes) == fresh
