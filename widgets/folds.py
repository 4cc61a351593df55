"""What has no source folds to one line that says how to add it."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

NO_LANE = "no lane: add `lanes:` to the config (or --prometheus URL / --metrics-url URL)"
NO_LEDGER = "no ledger: add `ledgers:` to the config, or run with --ledger PATH"
NO_PROFILE = "no roofline: set `hardware:` and `model:` on the lane (cockpit roofline --list)"


class FoldNotes(Static):
    """One muted line per folded pane (none: not shown)."""

    DEFAULT_CSS = """
    FoldNotes {
        height: auto;
        padding: 0 1;
        color: $text-muted;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    """

    notes: tuple[str, ...] = ()

    def show(self, notes: tuple[str, ...]) -> None:
        if notes != self.notes:
            self.notes = notes
            self.update(Content("\n".join(notes)))
        self.display = bool(notes)
