"""Where the money goes: spend-unit shares per token bucket, the prompt side's share, and the
window's USD where the ledger records costs, with the tokens of unpriced (local) models apart."""

from __future__ import annotations

from cockpit.figures import format_value
from cockpit.snapshot import LedgerSnapshot

from .pane import (
    MISSING,
    Bar,
    Line,
    Note,
    Pane,
    PaneView,
    Row,
    Segment,
    Source,
    Tone,
    ledger_source,
)

BUCKETS: tuple[tuple[str, Tone, str], ...] = (
    ("Input (fresh)", "primary", "█"),
    ("Cache read", "good", "▒"),
    ("Cache write", "warn", "▓"),
    ("Output", "accent", "▚"),
)
"""spend_split's bucket names, each with a colour and a glyph of its own."""


class SpendPane(Pane):
    """Spend split as a stacked bar, each bucket's share, prompt-side share ± caching; USD,
    and the tokens of priced and unpriced models; the lane's own models when narrowed."""

    TITLE = "Spend split"

    def show(self, ledger: LedgerSnapshot | None, ledger_configured: bool = True) -> None:
        self.view = spend_view(ledger, ledger_configured)


def _spend_rows(ledger: LedgerSnapshot | None, agent: Source) -> tuple[Bar, tuple[Row, ...]]:
    spend = ledger.figures.spend if ledger and ledger.figures else ()
    shares = {row.bucket: row.share for row in spend}
    segments = tuple(
        Segment(shares[name] or 0.0, tone, glyph)
        for name, tone, glyph in BUCKETS
        if shares.get(name) is not None
    )
    caption = "spend units" if segments else "no tokens"
    rows = tuple(
        Row(f"{glyph} {name}", format_value(shares[name], "share"), tone, agent.stale)
        if shares.get(name) is not None
        else Row(
            f"{glyph} {name}",
            MISSING,
            "muted",
            agent.stale,
            agent.absent if not spend else "no tokens in window",
        )
        for name, tone, glyph in BUCKETS
    )
    return Bar(segments, caption, stale=agent.stale), rows


def spend_view(ledger: LedgerSnapshot | None, ledger_configured: bool = True) -> PaneView:
    agent = ledger_source(ledger, ledger_configured)
    bar, rows = _spend_rows(ledger, agent)
    lines: tuple[Line, ...] = (
        bar,
        *rows,
        agent.row("prompt_side_share", "Prompt side, as cached", tone="primary"),
        agent.row("prompt_side_share_uncached", "Prompt side, uncached"),
        agent.row("cost_usd", "USD, window", tone="primary"),
        agent.row("paid_tokens", "Tokens, priced models"),
        agent.row("unpriced_tokens", "Tokens, unpriced/local"),
    )
    narrowed = ledger.figures.narrowed if ledger and ledger.figures else ""
    if narrowed:
        lines += (Note(f"lane only: {narrowed}"),)
    return PaneView(lines, (("ledger", agent.freshness),))
