"""What has no source folds to one line that says how to add it."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

NO_LANE = "no lane: add `lanes:` to the config, or run with --prometheus URL or --metrics-url URL"
NO_LEDGER = "no ledger: add `ledgers:` to the config, or run with --ledger PATH"
NO_PROFILE = (
    "no roofline: set `hardware:` and `model:` on the lane in the config"
    " (ids: cockpit roofline --list)"
)


class FoldNotes(Static):
    """One muted line per folded pane (none: not shown)."""

    DEFAULT_CSS = """
    FoldNotes {
        height: auto;
        padding: 0 1;
        color: $text-muted;
    }
    """

    notes: tuple[str, ...] = ()

    def show(self, notes: tuple[str, ...]) -> None:
        if notes != self.notes:
            self.notes = notes
            self.update(Content("\n".join(notes)))
        self.display = bool(notes)
