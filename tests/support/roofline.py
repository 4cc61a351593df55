"""The roofline pane's worked example: a lane load whose prefill point sits at exactly 25 % of
its roof and decode point at exactly 50 %, from the seed's formulas; the pane alone in an app,
counting its refreshes; where the plot put its marks."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual_plotext import PlotextPlot

from cockpit.roofline.model import LaneLoad, RooflineView, operating_points
from cockpit.roofline.profiles import find_hardware, find_model
from cockpit.widgets.roofline import Caption, RooflinePane
from cockpit.widgets.roofplot import RoofPlot, decade_label
from tests.support.pilot import Counting

H100 = find_hardware("h100")
LLAMA = find_model("llama-3.1-8b")
P, LAYERS, HIDDEN, K = 8.03e9, 32, 4096, 131_072
PEAK, BW, WEIGHTS = 989e12, 3.35e12, 2 * 8.03e9

CHUNK = 2048
PROMPT, FRESH, GENERATED, BATCH = 3000.0, 1000.0, 400.0, 8.0

# Prefill: computed tokens have mean position 3000 - 1000/2; a 2,048-token chunk is far
# above the ridge, so its roof is the peak and 25 % of it needs this rate.
PREFILL_FLOPS_PER_TOKEN = 2 * P + 4 * LAYERS * HIDDEN * (PROMPT - FRESH / 2)
PREFILL_RATE = 0.25 * PEAK / PREFILL_FLOPS_PER_TOKEN

# Decode: context 3000 + 400/2; memory bound, so a step twice the roof's is 50 % of it.
CONTEXT = PROMPT + GENERATED / 2
STEP_BYTES = WEIGHTS + BATCH * CONTEXT * K
ROOF_STEP = STEP_BYTES / BW
CEILING_TOK_S = BATCH / ROOF_STEP

LOAD = LaneLoad(
    effective_prefill_rate=PREFILL_RATE,
    mean_prompt=PROMPT,
    mean_fresh_prefill=FRESH,
    mean_generated=GENERATED,
    running=BATCH,
    itl_s=2 * ROOF_STEP,
    tokens_per_step=1.0,
)
VIEW = RooflineView(H100, LLAMA, operating_points(LOAD, H100, LLAMA, chunk_tokens=CHUNK))


class PaneApp(App[None]):
    """Just the pane, filling the screen."""

    def __init__(self, view: RooflineView | None = VIEW) -> None:
        super().__init__()
        self.initial_view = view

    def compose(self) -> ComposeResult:
        yield RooflinePane()

    def on_mount(self) -> None:
        self.query_one(RooflinePane).show(self.initial_view)


def plot_text(app: App[Any]) -> str:
    rendered = app.query_one(PlotextPlot).render()
    assert isinstance(rendered, Text)
    return rendered.plain


def plot_area(app: App[Any]) -> str:
    """Only the canvas of the plot: its rows between the frame lines, right of the y axis (whose
    labels, `1P` for one, are no marks), markers included."""
    rows = [line for line in plot_text(app).splitlines() if "┤" in line or "│" in line]
    return "\n".join(row.split("┤" if "┤" in row else "│", 1)[1] for row in rows)


class CountedPlot(RoofPlot, Counting):
    pass


class CountedCaption(Caption, Counting):
    pass


class CountedPane(RooflinePane, Counting):
    """The pane, its plot and its caption, each counting its refreshes."""

    def __init__(self) -> None:
        super().__init__()
        self.plot = CountedPlot(id="roofline-plot")
        self.caption = CountedCaption(id="roofline-caption")


class CountedApp(PaneApp):
    def compose(self) -> ComposeResult:
        yield CountedPane()

    @property
    def pane(self) -> CountedPane:
        return self.query_one(CountedPane)


def mark_position(text: str, letter: str) -> tuple[float, float]:
    """Where `letter` sits on the plot, in log10 units read off the axes' own ticks:
    the y ticks are the rows labelled `1T`, `10T`…; the x ticks the `┬` under the canvas,
    labelled in order on the row below."""
    rows = text.splitlines()
    y_ticks = [
        (y, row.split("┤")[0].strip()) for y, row in enumerate(rows) if "┤" in row.split("│")[0]
    ]
    frame = next(y for y, row in enumerate(rows) if "└" in row)
    axis = rows[frame].index("└")
    columns = [x for x, char in enumerate(rows[frame]) if char == "┬"]
    x_ticks = list(zip(columns, rows[frame + 1].split(), strict=True))
    exponents = {decade_label(e): e for e in range(-3, 19)}
    y, x = next(
        (y, row.index(letter, axis + 1))
        for y, row in enumerate(rows[:frame])
        if letter in row[axis + 1 :]
    )

    def along(ticks: list[tuple[int, str]], at: int) -> float:
        (a, low), (b, high) = ticks[0], ticks[-1]
        return exponents[low] + (at - a) * (exponents[high] - exponents[low]) / (b - a)

    return along(x_ticks, x), along(y_ticks, y)
