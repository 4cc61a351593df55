"""Screens over the cockpit: the `?` help screen and the model filter."""

from __future__ import annotations

from collections.abc import Iterable
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Input, Static

KEY_HELP: tuple[tuple[str, str], ...] = (
    ("1 – 9", "show lane 1 to 9"),
    ("tab / shift+tab", "next / previous lane"),
    ("w / W", "next / previous window (5m 1h 6h 24h 7d 30d 90d)"),
    ("r", "refresh now"),
    ("p", "pause / resume polling"),
    ("e", "export the current receipt as markdown"),
    ("t", "next theme"),
    ("m", "filter the lane by model_name (empty: all)"),
    ("ctrl+p", "command palette: lanes, windows, export, themes"),
    ("?", "this help"),
    ("q", "quit"),
)
"""Every key; the footer shows the most used of them, in this order."""

PANE_HELP: tuple[str, ...] = (
    "Panes, prefill first: prefix cache · prefill · phases & decode ·",
    "roofline · token ratios · spend split.",
    "A dim value is stale: its source failed, the last good value stays",
    "and the border says why and since when. — is missing: hover for why.",
    "Times are UTC, as in receipts and --at.",
    "Roofline M: the point the engine's own FLOP and byte counters give;",
    "its ×0.75: measured FLOP/s over modelled prefill + decode FLOP/s.",
)


def help_content(keys: Iterable[tuple[str, str]] = KEY_HELP) -> Content:
    rows = list(keys)
    width = max(len(key) for key, _ in rows)
    lines = [Content.assemble((key.ljust(width), "bold $accent"), "  ", text) for key, text in rows]
    lines.append(Content(""))
    lines.extend(Content.styled(line, "$text-muted") for line in PANE_HELP)
    return Content("\n").join(lines)


class HelpScreen(ModalScreen[None]):
    """Every key and what the panes' marks mean; any of escape, q or ? closes it."""

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > VerticalScroll {
        width: auto;
        max-width: 90%;
        height: auto;
        max-height: 90%;
        border: round $primary;
        border-title-color: $primary;
        background: $surface;
        padding: 0 1;
    }
    HelpScreen Static {
        width: auto;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "close", show=False),
        Binding("q", "dismiss", "close", show=False),
        Binding("question_mark", "dismiss", "close", show=False),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll() as box:
            box.border_title = "lane-cockpit keys"
            yield Static(help_content(), id="help-text")

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(result)


class ModelFilterScreen(ModalScreen[str | None]):
    """Asks for a `model_name` to filter the lane by; enter applies, escape cancels."""

    DEFAULT_CSS = """
    ModelFilterScreen {
        align: center middle;
    }
    ModelFilterScreen > Input {
        width: 60;
        max-width: 90%;
        border: round $primary;
    }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", show=False),
    ]

    def __init__(self, current: str | None) -> None:
        super().__init__()
        self.current = current or ""

    def compose(self) -> ComposeResult:
        field = Input(self.current, placeholder="model_name (empty: the whole lane)")
        field.border_title = "filter the lane by model"
        yield field

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)
