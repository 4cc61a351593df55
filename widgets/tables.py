"""The ledger per source, per model and per profile: the receipt's tables, on screen."""

from __future__ import annotations

from cockpit.core.figures import format_value
from cockpit.core.ledger_figures import GroupRatio
from cockpit.core.snapshot import LedgerSnapshot

from .pane import Cells, Line, Note, Pane, PaneView, ledger_source

HEADER = ("sessions", "calls", "prompt", "output", "P:O", "fresh:O", "cache rd")
COLUMN = 10
NAME_CELLS = 24


def group_cells(group: GroupRatio, stale: bool = False) -> Cells:
    counts = group.counts
    values = (
        format_value(counts.sessions, "count"),
        format_value(counts.api_calls, "count"),
        format_value(counts.prompt, "tokens"),
        format_value(counts.output, "tokens"),
        format_value(group.prompt_output, "ratio"),
        format_value(group.fresh_output, "ratio"),
        format_value(group.cache_read_share, "share"),
    )
    return Cells(group.name, values, stale=stale, column=COLUMN, min_label=NAME_CELLS)


def tables_view(ledger: LedgerSnapshot | None, configured: bool = True) -> PaneView:
    agent = ledger_source(ledger, configured)
    figures = ledger.figures if ledger is not None else None
    if figures is None:
        return PaneView((Note(agent.absent),), (("ledger", agent.freshness),))
    missing = ledger.totals.missing if ledger is not None and ledger.totals else {}
    lines: list[Line] = []
    for title, groups, note in (
        ("per source", figures.by_source, missing.get("by_source", "")),
        ("per model", figures.by_model, ""),
        ("per profile", figures.by_profile, missing.get("by_profile", "")),
    ):
        lines.append(Cells(title, HEADER, "primary", column=COLUMN, min_label=NAME_CELLS))
        lines += [group_cells(group, agent.stale) for group in groups]
        if note or not groups:
            lines.append(Note(note or f"{title}: no sessions in the window"))
    return PaneView(tuple(lines), (("ledger", agent.freshness),))


class LedgerTables(Pane):
    """Sessions, API calls, prompt and output tokens, ratios and cache-read share per group."""

    BORDER_TITLE = "Ledger tables"
    build = staticmethod(tables_view)
