"""Screens over the cockpit: the `?` help, a pane's figure details, the ledger and models
tables and the model filter. Text from outside (names, queries, reasons) is shown as data,
never as markup."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import ItemGrid, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.widget import Widget
from textual.widgets import DataTable, Input, OptionList, Static

from cockpit.core.catalogue import TRENDS, definition, pane_keys, reads, slo_keys
from cockpit.core.compare import Comparison, change_text, compare, delta_text
from cockpit.core.figures import format_figure
from cockpit.core.gpu_figures import GPU_TREND, NO_GPU_SOURCE, NO_GPU_STEP
from cockpit.core.ledger_figures import ledger_definition
from cockpit.core.model import Figure, LaneTotals, SourceFailure
from cockpit.core.models import NO_MODELS_SEEN, model_rows
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot
from cockpit.core.text import first_line, visible
from cockpit.core.timeutil import stamp
from cockpit.runtime.card_marks import card_length, card_requests
from cockpit.runtime.card_receipts import compared_figures
from cockpit.runtime.cards import Card
from cockpit.widgets.models import ModelsPane
from cockpit.widgets.pane import Pane, Row, lane_source
from cockpit.widgets.tables import LedgerTables
from cockpit.widgets.tails import TAIL_KEYS, TailsPane
from cockpit.widgets.trends import TrendsPane
from cockpit.widgets.vitals import VitalStrip

KEY_GROUPS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("Lanes and windows", (
        ("1 – 9", "show lane 1 to 9"),
        ("tab", "next lane"),
        ("shift+tab", "previous lane"),
        ("w / W", "next / prev window"),
        ("escape", "back to the overview"),
    )),
    ("Reading", (
        ("r", "refresh now"),
        ("p", "pause / resume polling"),
        ("m", "filter the lane by model"),
        ("e", "export the receipt"),
    )),
    ("Panes", (
        ("↓ → / ↑ ←", "next / previous pane"),
        ("enter / i", "the pane's details"),
        ("l", "the ledger tables"),
        ("M", "models, LoRA adapters"),
    )),
    ("The cockpit", (
        ("t", "next theme"),
        ("ctrl+p", "command palette"),
        ("?", "this help"),
        ("q / ctrl+c", "quit"),
    )),
    ("The overview", (
        ("enter", "open the lane's panes"),
        ("s / S", "sort column / reverse"),
        ("/", "filter lanes by name"),
        ("c", "column the trend follows"),
        ("escape", "clear the filter"),
    )),
    ("Cards", (
        ("b", "start / stop a card"),
        ("B", "the cards; compare two"),
    )),
)  # fmt: skip
"""Every key, by what it acts on; the footer shows the most used of them."""

KEY_COLUMN = 32
"""The narrowest column of keys: two side by side from 80 terminal columns."""

PANE_HELP: tuple[str, ...] = (
    "A dim value is stale: its source failed, the last good value stays",
    "and the border says why and since when. — is missing: enter or i on",
    "its pane says why. Times are UTC, as in receipts and --at.",
    "Roofline M: the point the engine's own FLOP and byte counters give;",
    "its ×0.75: measured FLOP/s over modelled prefill + decode FLOP/s.",
)


def key_group(group: str, rows: Sequence[tuple[str, str]]) -> Content:
    """A group's name, then its keys, one a line, with what each does."""
    width = max(len(key) for key, _ in rows)
    keys = [Content.assemble((key.ljust(width), "bold $accent"), "  ", text) for key, text in rows]
    return Content("\n").join([Content.styled(group, "bold $primary"), *keys])


def help_notes(rules: Sequence[str] = ()) -> Content:
    """The health rules (as data: they name configured values), then what the marks mean."""
    lines = [Content.styled("Health rules", "bold $primary")] if rules else []
    lines += [Content(visible(rule)) for rule in rules]
    lines += [Content(""), *(Content.styled(line, "$text-muted") for line in PANE_HELP)]
    return Content("\n").join(lines)


Block = tuple[Content, bool]
"""A paragraph of a text screen, and whether it is indented (its wrapped lines too)."""
ResultT = TypeVar("ResultT")


class Boxed(ModalScreen[ResultT]):
    """A screen over the cockpit's panes, its contents centred (in a bordered `.box`)."""

    DEFAULT_CSS = """
    Boxed {
        align: center middle;
    }
    Boxed > .box {
        width: 100%;
        height: auto;
        max-height: 100%;
        border: round $primary;
        border-title-color: $primary;
        background: $surface;
    }
    Boxed .hint {
        color: $text-muted;
        padding: 0 1;
    }
    """

    AUTO_FOCUS = "*"  # the app's own names its panes' body


class Overlay(Boxed[None]):
    """A screen over the cockpit's panes; escape or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "close", show=False),
        Binding("q", "dismiss", "close", show=False),
    ]


class TextScreen(Overlay):
    """A box of text over the cockpit, scrolled with the arrows."""

    DEFAULT_CSS = """
    TextScreen > VerticalScroll.box {
        width: 90%;
        max-height: 90%;
        padding: 0 1;
    }
    TextScreen .indented {
        padding-left: 2;
    }
    """

    def __init__(self, title: str, blocks: Sequence[Block]) -> None:
        super().__init__()
        self.title_text, self.blocks = title, blocks

    @property
    def text(self) -> str:
        """What the screen says, as plain text."""
        return "\n".join(block.plain for block, _ in self.blocks)

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="box") as box:
            box.border_title = Content(visible(self.title_text))
            yield from self.body()

    def body(self) -> ComposeResult:
        for block, indented in self.blocks:
            yield Static(block, classes="indented" if indented else "")


class HelpScreen(TextScreen):
    """Every key first, its groups side by side when wide enough, then the health rules and
    what the panes' marks mean; the arrows and page keys scroll it, escape, q or ? close it."""

    DEFAULT_CSS = """
    HelpScreen ItemGrid {
        grid-gutter: 0 2;
        margin-bottom: 1;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "dismiss", "close", show=False)
    ]

    def __init__(self, rules: Sequence[str] = ()) -> None:
        keys = [(key_group(group, rows), False) for group, rows in KEY_GROUPS]
        super().__init__("lane-cockpit keys", [*keys, (help_notes(rules), False)])

    def body(self) -> ComposeResult:
        *groups, notes = (Static(block) for block, _ in self.blocks)
        yield ItemGrid(*groups, min_column_width=KEY_COLUMN)
        yield notes


class DetailsScreen(TextScreen):
    """A pane's figures: value, definition, query, evaluation time, why one is missing."""


class PaneOverlay(Overlay):
    """One pane at any terminal size (one the lane's screen shows only when wide), shown with
    `shown` (the pane's `show` arguments)."""

    DEFAULT_CSS = """
    PaneOverlay > VerticalScroll {
        width: 100%;
        height: auto;
        max-height: 100%;
    }
    """

    def __init__(self, pane: LedgerTables | ModelsPane, *shown: Any) -> None:
        super().__init__()
        self.pane, self.shown = pane, shown

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield self.pane

    def on_mount(self) -> None:
        self.pane.show(*self.shown)


class LedgerTablesScreen(PaneOverlay):
    """The ledger's per-source, per-model and per-profile tables."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("l", "dismiss", "close", show=False)]

    def __init__(self, snapshot: LedgerSnapshot | None, configured: bool) -> None:
        super().__init__(LedgerTables(id="ledger-tables"), snapshot, configured)


class ModelsScreen(PaneOverlay):
    """The lane's models, a row each, and its LoRA adapters."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("M", "dismiss", "close", show=False),
        Binding("enter,i", "app.details", "details", show=False),  # a pop-up hides the app's
    ]

    def __init__(self, lane: LaneSnapshot | None, configured: bool) -> None:
        super().__init__(ModelsPane(id="models-table"), lane, configured)


# --- a pane's details -----------------------------------------------------------------------


def _field(name: str, text: str) -> Content:
    return Content.assemble((f"{name:<8}", "$text-muted"), visible(text))


def _block(head: Content, fields: Sequence[Content]) -> list[Block]:
    """A figure's head, then its fields indented under it (none: the head alone)."""
    return [(head, False), *([(Content("\n").join(fields), True)] if fields else [])]


def _figure_fields(
    figure: Figure, lane: LaneSnapshot | None, ledger: LedgerSnapshot | None
) -> list[Content]:
    """What one figure is and where it came from: its source is the snapshot that holds it."""
    held = lane.figures.figures.get(figure.key) if lane is not None and lane.figures else None
    if lane is not None and lane.totals is not None and held == figure:
        return _lane_fields(figure, lane.totals)
    totals = ledger.totals if ledger is not None else None
    queries = [figure.query] if figure.query else list(totals.queries if totals else ())
    end = totals.end if totals is not None else None
    return _said(figure, ledger_definition(figure.key), queries, end)


def _lane_fields(figure: Figure, totals: LaneTotals) -> list[Content]:
    """A figure of `totals` (a lane's, a model's): its own query, then its raw keys'."""
    queries = [figure.query] if figure.query else []
    from_raw = (totals.queries.get(key) for key in reads(figure.key))
    queries += [query for query in from_raw if query and query not in queries]
    return _said(figure, definition(figure.key), queries, totals.end)


def _said(figure: Figure, meaning: str, queries: Sequence[str], end: float | None) -> list[Content]:
    lines = [Content.styled(meaning, "italic")] if meaning else []
    lines += [_field("query", query) for query in queries]
    if end is not None:
        lines.append(_field("at", stamp(end)))
    if figure.missing:
        lines.append(_field("missing", figure.reason or "no reason given"))
    elif figure.reason:
        lines.append(_field("note", figure.reason))
    return lines


def _model_blocks(lane: LaneSnapshot | None) -> list[Block]:
    """Each model's figures, each read from its model's series (its name is outside text)."""
    totals = lane.totals if lane is not None else None
    if totals is None:
        return []
    if not totals.models:
        return [(_field("models", totals.missing.get("models", NO_MODELS_SEEN)), False)]
    blocks: list[Block] = []
    for row in model_rows(totals):
        for figure in row.figures.values():
            name = (visible(row.model), "bold $primary")
            head = Content.assemble(name, "  ", (figure.label, "bold"), "  ", format_figure(figure))
            blocks += _block(head, _lane_fields(figure, totals.models[row.model]))
    return blocks


def _rows(widget: Widget, lane: LaneSnapshot | None) -> list[Row]:
    """The figures a widget shows, as rows: the lane's by key where its lines are not rows
    (the vital strip packs its figures into items)."""
    engine = lane_source(lane)
    if isinstance(widget, VitalStrip):
        keys = pane_keys("vitals", lane.totals if lane is not None else None)
    elif isinstance(widget, TailsPane):
        keys = (*TAIL_KEYS, *slo_keys(engine.figures))
    else:
        lines = widget.view.lines if isinstance(widget, Pane) else ()
        return [line for line in lines if isinstance(line, Row)]
    return [engine.row(key) for key in keys if engine.get(key) is not None]


def _trend_blocks(lane: LaneSnapshot | None) -> list[Block]:
    """Each trend series: what it follows, its step and span, its gaps."""
    totals = lane.totals if lane is not None else None
    if totals is None or totals.trend is None:
        return [(Content("no trend read yet"), False)]
    trend, gpu = totals.trend, totals.gpu
    blocks: list[Block] = []
    for series in (*TRENDS, GPU_TREND):
        points = trend.series.get(series.key, ())
        gaps = sum(point is None for point in points)
        every = f"{len(points)}, one per {trend.step_s:g} s, the last to {stamp(trend.end)}"
        fields = [Content.styled(series.definition, "italic")]
        if series is GPU_TREND and (gpu is None or gaps == len(points)):
            why = NO_GPU_SOURCE if gpu is None else gpu.reason or NO_GPU_STEP
            fields.append(_field("missing", why))
        else:
            fields.append(_field("points", f"{every}; {gaps} without data (blank)"))
        blocks += _block(Content.styled(series.label, "bold"), fields)
    return blocks


def details_blocks(
    widget: Widget, lane: LaneSnapshot | None, ledger: LedgerSnapshot | None
) -> list[Block]:
    """Every figure a widget shows, with what the screen has no room for."""
    sources = (
        widget.view.sources
        if isinstance(widget, Pane)
        else (("lane", lane_source(lane).freshness),)
    )
    blocks: list[Block] = [
        (_field(name, freshness.describe()), False)
        for name, freshness in sources
        if freshness.state != "ok" or freshness.reason
    ]
    if isinstance(widget, ModelsPane):
        blocks += _model_blocks(lane)
    for line in _rows(widget, lane):
        head = Content.assemble((visible(line.label), "bold"), "  ", visible(line.value))
        if line.figure is not None:
            fields = _figure_fields(line.figure, lane, ledger)
        else:
            fields = [_field("missing", line.reason)] if line.reason else []
        blocks += _block(head, fields)
    if isinstance(widget, TrendsPane):
        blocks += _trend_blocks(lane)
    return blocks or [(Content("no figures here yet"), False)]


# --- questions ------------------------------------------------------------------------------


class Ask(Boxed[str | None]):
    """Asks for a line of text (`value` offered): enter gives it, escape cancels."""

    DEFAULT_CSS = """
    Ask > Vertical.box {
        width: 60;
        max-width: 90%;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "dismiss", "cancel", show=False)]

    def __init__(self, title: str, value: str, placeholder: str) -> None:
        super().__init__()
        self.title_text, self.value, self.placeholder = title, value, placeholder

    def compose(self) -> ComposeResult:
        with Vertical(classes="box") as box:
            box.border_title = Content(visible(self.title_text))
            yield Input(self.value, placeholder=self.placeholder)
            yield from self.below()

    def below(self) -> ComposeResult:
        yield from ()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())


NamesLoader = Callable[[], Awaitable[Sequence[str]]]


class ModelFilterScreen(Ask):
    """Asks for a `model_name` to filter the lane by, offering those the lane has: enter
    applies what is typed, a chosen name applies it, escape cancels."""

    DEFAULT_CSS = """
    ModelFilterScreen OptionList {
        height: auto;
        max-height: 12;
        display: none;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("down", "to_names", "names", show=False)]

    def __init__(self, current: str | None, names: NamesLoader | None = None) -> None:
        super().__init__(
            "filter the lane by model", current or "", "model_name (empty: the whole lane)"
        )
        self.load_names = names
        self.names: tuple[str, ...] = ()

    def below(self) -> ComposeResult:
        if self.load_names is not None:
            yield Static("reading the lane's model names…", id="model-names-note", classes="hint")
        yield OptionList()

    def on_mount(self) -> None:
        if self.load_names is not None:
            self.run_worker(self._offer_names(self.load_names), exit_on_error=False)

    async def _offer_names(self, load: NamesLoader) -> None:
        note = self.query_one("#model-names-note", Static)
        try:
            self.names = tuple(await load())
        except SourceFailure as error:
            note.update(Content(f"model names: {visible(first_line(str(error)))}"))
            return
        options = self.query_one(OptionList)
        options.add_options(Content(visible(name)) for name in self.names)
        options.display = bool(self.names)
        self.query_one(Input).suggester = SuggestFromList(self.names)
        note.update("the lane's model names (↓ to choose):" if self.names else
                    "no model_name on the lane's series")  # fmt: skip

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.names[event.option_index])

    def action_to_names(self) -> None:
        options = self.query_one(OptionList)
        if options.option_count:
            options.focus()
            options.highlighted = options.highlighted or 0


# --- benchmark cards ------------------------------------------------------------------------


class CardNameScreen(Ask):
    """Asks the name of the card to start (a default offered): enter starts it, escape cancels."""

    def __init__(self, lane: str, default: str) -> None:
        super().__init__(f"start a card on lane {lane}", default, "the card's name")


def _cell(text: str) -> Text:
    """A table cell as plain text (a DataTable reads a str as markup)."""
    return Text(visible(text))


class CardsScreen(Overlay):
    """The lane's cards, oldest first; space marks a card A, then another B, and the two are
    compared figure by figure (A, B, B − A, the change, a verdict); escape closes."""

    DEFAULT_CSS = """
    CardsScreen DataTable {
        height: auto;
        max-height: 10;
    }
    CardsScreen #cards-compared {
        max-height: 100%;
        display: none;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "mark", "mark A / B", show=False),
        Binding("B", "dismiss", "close", show=False),
    ]

    def __init__(self, lane: str, cards: Sequence[Card]) -> None:
        super().__init__()
        self.lane, self.cards = lane, tuple(cards)
        self.marked: list[int] = []
        """The cards marked A and B, by row."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="box") as box:
            box.border_title = Content(visible(f"cards of lane {self.lane}"))
            yield DataTable(id="cards-list", cursor_type="row")
            yield Static(self._hint(), id="cards-hint", classes="hint")
            yield DataTable(id="cards-compared", show_cursor=False)

    def on_mount(self) -> None:
        table = self.query_one("#cards-list", DataTable)
        table.add_column("", key="mark", width=1)
        table.add_columns("Card", "Start", "Length", "Requests", "Note")
        for row, card in enumerate(self.cards):
            length, requests = card_length(card), card_requests(card)
            cells = (card.name, stamp(card.start), length, requests, card.note)
            table.add_row(Text(""), *(_cell(cell) for cell in cells), key=str(row))
        compared = self.query_one("#cards-compared", DataTable)
        compared.add_columns("Figure", "A", "B", "B − A", "Change", "Verdict")

    def _hint(self) -> str:
        if not self.cards:
            return "no cards on this lane yet: b starts one"
        if len(self.marked) < 2:
            return "space marks a card A, then another B, to compare them"
        a, b = (self.cards[row] for row in self.marked)
        return visible(f"A {a.name} ({card_length(a)}) · B {b.name} ({card_length(b)})")

    def action_mark(self) -> None:
        table = self.query_one("#cards-list", DataTable)
        if not self.cards:
            return
        row = table.cursor_row
        if row in self.marked:
            self.marked.remove(row)
        else:
            self.marked = [*self.marked, row] if len(self.marked) < 2 else [row]
        for at in range(len(self.cards)):
            mark = "AB"[self.marked.index(at)] if at in self.marked else ""
            table.update_cell(str(at), "mark", Text(mark))
        self.query_one("#cards-hint", Static).update(Content(self._hint()))
        self._show_comparison()

    def comparison(self) -> list[Comparison]:
        """The marked cards' figures compared (none until two are marked)."""
        if len(self.marked) < 2:
            return []
        a, b = (self.cards[row] for row in self.marked)
        bounds = {**a.receipt.get("buckets", {}), **b.receipt.get("buckets", {})}
        return compare(compared_figures(a.receipt), compared_figures(b.receipt), bounds)

    def _show_comparison(self) -> None:
        compared = self.query_one("#cards-compared", DataTable)
        compared.clear()
        rows = self.comparison()
        for row in rows:
            cells = (row.label, row.a_text, row.b_text, delta_text(row), change_text(row),
                     row.verdict)  # fmt: skip
            compared.add_row(*(_cell(cell) for cell in cells))
        compared.display = bool(rows)
