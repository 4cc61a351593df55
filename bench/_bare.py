"""The yardstick: a bare Textual app (Header, one Static, Footer), started like the cockpit.

`python -m bench._bare`. Its keys bar drawn is its full frame (`common.full_frame`). With
`--libraries` it first
imports the libraries the cockpit reads and draws with, and with `--modules` those and the
cockpit's own modules too (all `cockpit` imports before its first frame, without reading,
composing or drawing anything), so the start-up benchmark can show what they cost on their own.
"""

from __future__ import annotations

import sys

from textual.app import App, ComposeResult
from textual.widgets import Footer, Header, Static

LIBRARIES = ("yaml", "httpx", "aiosqlite", "plotext", "textual_plotext")
"""What the cockpit imports on its start-up path besides Textual and the standard library."""
MODULES = (
    "cockpit.cli.main",
    "cockpit.app.lifecycle",
    "cockpit.runtime.feeds",
    "cockpit.sources.prometheus",
    "cockpit.sources.ledger",
    "cockpit.app.app",
)
"""The cockpit's own modules on its start-up path (they import the rest of what it loads)."""


class BareApp(App[None]):
    BINDINGS = [("q", "quit", "quit")]  # noqa: RUF012

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("bare Textual app: ready")
        yield Footer()


def preload(flags: list[str]) -> None:
    """Imports what `--libraries` or `--modules` names, before the app starts."""
    import importlib

    names = [*LIBRARIES, *MODULES] if "--modules" in flags else []
    if "--libraries" in flags and not names:
        names = list(LIBRARIES)
    for name in names:
        importlib.import_module(name)


if __name__ == "__main__":
    preload(sys.argv[1:])
    BareApp().run()
