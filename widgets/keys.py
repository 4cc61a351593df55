"""The key bar: the cockpit's keys on the bottom line, drawn as one line of text.

Textual's Footer makes a widget per key and composes them again whenever the bindings may
have changed; the cockpit's keys never change, so one line drawn once does the same job. A
click on a key runs its action, as on the Footer.
"""

from __future__ import annotations

from typing import NamedTuple

from textual.binding import Binding
from textual.content import Content
from textual.events import Click
from textual.widget import Widget

PALETTE_SEPARATOR = "▏"


class Key(NamedTuple):
    """One key as shown: what to press, what it does, and the action it runs."""

    display: str
    description: str
    action: str


Span = tuple[int, int, Key]
"""Columns [start, end) of one key's item, and the key."""


def bar_content(keys: list[Key], palette: Key | None, width: int) -> tuple[Content, list[Span]]:
    """The bar's line, and where each key's item is.

    The palette's key goes on the right, only if it fits beside the others."""
    items = [
        Content.assemble((key.display, "bold $footer-key-foreground"), f" {key.description}")
        for key in keys
    ]
    line = Content(" ").join(items)
    spans: list[Span] = []
    x = 0
    for key, item in zip(keys, items, strict=True):
        spans.append((x, x + item.cell_length, key))
        x += item.cell_length + 1
    if palette is not None:
        right = Content.assemble(
            (PALETTE_SEPARATOR, "$text-muted"),
            (palette.display, "bold $footer-key-foreground"),
            f" {palette.description} ",
        )
        gap = width - line.cell_length - right.cell_length
        if gap >= 1:
            line = Content.assemble(line, " " * gap, right)
            spans.append((width - right.cell_length, width, palette))
    return line, spans


class KeyBar(Widget):
    """The shown bindings of the screen it is mounted on, in their order, and ^p palette.

    Taken once, at mount: the cockpit's keys don't depend on focus or state."""

    DEFAULT_CSS = """
    KeyBar {
        dock: bottom;
        height: 1;
        background: $footer-background;
        color: $footer-description-foreground;
        text-wrap: nowrap;
        text-overflow: clip;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._keys: list[Key] = []
        self._palette: Key | None = None
        self._spans: list[Span] = []

    def on_mount(self) -> None:
        app = self.app
        seen: set[str] = set()
        for active in self.screen.active_bindings.values():
            binding = active.binding
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            display = binding.key_display or app.get_key_display(binding)
            self._keys.append(Key(display, binding.description, binding.action))
        if app.ENABLE_COMMAND_PALETTE:
            palette = Binding(app.COMMAND_PALETTE_BINDING, "command_palette", "palette")
            self._palette = Key(app.get_key_display(palette), "palette", "command_palette")

    @property
    def keys(self) -> list[Key]:
        return list(self._keys)

    def render(self) -> Content:
        line, self._spans = bar_content(self._keys, self._palette, self.size.width)
        return line

    async def on_click(self, event: Click) -> None:
        key = self.key_at(event.x)
        if key is not None:
            await self.app.run_action(key.action)

    def key_at(self, x: int) -> Key | None:
        """The key whose item is drawn at column `x`, if any."""
        return next((key for start, end, key in self._spans if start <= x < end), None)
