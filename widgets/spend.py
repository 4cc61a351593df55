"""Where the money goes: spend-unit shares per token bucket, the prompt side's share, and the
window's USD where the ledger records costs, with the tokens of unpriced (local) models apart."""

from __future__ import annotations

from cockpit.core.figures import format_value
from cockpit.core.snapshot import LedgerSnapshot

from .pane import Bar, Line, Note, Pane, PaneView, Row, Segment, Tone, ledger_source

BUCKETS: tuple[tuple[str, Tone, str], ...] = (
    ("Input (fresh)", "primary", "█"),
    ("Cache read", "good", "▒"),
    ("Cache write", "warn", "▓"),
    ("Output", "accent", "▚"),
)
"""spend_split's bucket names, each with a colour and a glyph of its own."""


def spend_view(ledger: LedgerSnapshot | None, ledger_configured: bool = True) -> PaneView:
    agent = ledger_source(ledger, ledger_configured)
    figures = ledger.figures if ledger else None
    spend = figures.spend if figures else ()
    shares = {row.bucket: row.share for row in spend if row.share is not None}
    lacks = {row.bucket: row.missing for row in spend if row.missing}
    segments = tuple(
        Segment(shares[name], tone, glyph) for name, tone, glyph in BUCKETS if name in shares
    )
    reason = "no tokens in window" if spend else agent.absent
    lines: tuple[Line, ...] = (
        Bar(segments, "spend units" if segments else "no tokens", stale=agent.stale),
        *(
            Row(f"{glyph} {name}", format_value(shares[name], "share"), tone, agent.stale)
            if name in shares
            else agent.missing(f"{glyph} {name}", lacks.get(name) or reason)
            for name, tone, glyph in BUCKETS
        ),
        agent.row("prompt_side_share", "Prompt side, as cached", tone="primary"),
        agent.row("prompt_side_share_uncached", "Prompt side, uncached"),
        agent.row("cost_usd", "USD, window", tone="primary"),
        agent.row("paid_tokens", "Tokens, priced models"),
        agent.row("unpriced_tokens", "Tokens, unpriced/local"),
    )
    if figures and figures.narrowed:
        lines += (Note(f"lane only: {figures.narrowed}"),)
    return PaneView(lines, (("ledger", agent.freshness),))


class SpendPane(Pane):
    """Spend shares per bucket, prompt-side share ± caching, USD, priced and unpriced tokens."""

    BORDER_TITLE = "Spend split"
    build = staticmethod(spend_view)
