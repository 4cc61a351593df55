"""Prefix-cache hit rate: the first thing to read on an agent lane."""

from __future__ import annotations

from cockpit.core.catalogue import HIT_RATE_BAND, SOURCE_WORDS
from cockpit.core.figures import format_figure, format_value, si
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot

from .pane import (
    Bar,
    Line,
    Note,
    Pane,
    PaneView,
    Row,
    Segment,
    Source,
    Tone,
    lane_source,
    ledger_source,
)

LOW = HIT_RATE_BAND.low


def band(rate: float | None, low: float) -> tuple[Tone, str]:
    """The hit rate's tone, and its band in words too, so the gauge reads without colour."""
    high = max(low, HIT_RATE_BAND.high)
    if rate is None:
        return "muted", ""
    if rate < low:
        return "bad", f"low: under {low * 100:g}%, prompts redone"
    if rate > high:
        return "good", f"good: above {high * 100:g}%"
    return "warn", f"fair: {low * 100:g}–{high * 100:g}%"


def _hits_row(engine: Source) -> Row:
    hits, queries = engine.value("prefix_cache_hits"), engine.value("prefix_cache_queries")
    figure = engine.get("prefix_cache_queries") or engine.get("prefix_cache_hits")
    reason = figure.reason if figure and figure.reason else engine.absent
    shown = None if hits is None or queries is None else hits_of_queries(hits, queries)
    return engine.text("Hits / queries", shown, reason)


SPLITS: tuple[tuple[str, str, str, str, bool], ...] = (
    ("prompt_from", "prompt_from_share", "Prompt", "Prompt by source", True),
    ("cached", "cached_share", "Cached", "Cached by tier", False),
)
"""(tokens family, share family, a row's head, the whole's, whether a member at 0 is shown)."""


def _split_rows(
    engine: Source, tokens: str, share: str, head: str, whole: str, zeros: bool
) -> list[Row]:
    """One row per member, `tokens · share`; the group's reason once where the engine has none."""
    names = [key.removeprefix(f"{tokens}_") for key in engine.figures
             if key.startswith(f"{tokens}_") and not key.startswith(f"{share}_")]  # fmt: skip
    figures = [engine.figures[f"{tokens}_{name}"] for name in names]
    if not figures or all(figure.missing for figure in figures):
        return [engine.missing(whole, figures[0].reason if figures else engine.absent)]
    shown = [(n, f) for n, f in zip(names, figures, strict=True) if zeros or f.value]
    if not shown:  # nothing cached in the window: one row says so
        return [engine.row(f"{tokens}_{names[0]}", whole, "muted")]
    rows = []
    for name, figure in shown:
        part = engine.get(f"{share}_{name}")
        text = format_figure(figure) + (
            f" · {format_figure(part)}" if part and not part.missing else ""
        )
        rows.append(Row(f"{head}: {SOURCE_WORDS.get(name, name)}", text, stale=engine.stale,
                        figure=figure))  # fmt: skip
    return rows


def hits_of_queries(hits: float, queries: float) -> str:
    """`571 k / 1.04 M`: each number with its own prefix; exact counts below a million."""
    if queries < 1e6:
        return f"{format_value(hits, 'tokens')} / {format_value(queries, 'tokens')}"
    return f"{si(hits, 3)} / {si(queries, 3)}"


def cache_view(
    lane: LaneSnapshot | None,
    ledger: LedgerSnapshot | None,
    ledger_configured: bool = True,
    lane_configured: bool = True,
    low: float = LOW,
) -> PaneView:
    engine = lane_source(lane, lane_configured)
    rate = engine.value("prefix_cache_hit_rate")
    tone, words = band(rate, low)
    figure = engine.get("prefix_cache_hit_rate")
    lines: tuple[Line, ...] = (
        Bar((Segment(rate or 0.0, tone),), format_value(rate, "share"), stale=engine.stale),
        Note(words or (figure.reason if figure else engine.absent), tone),
        engine.row("prefix_cache_hit_rate", "Hit rate (engine)", tone=tone),
        _hits_row(engine),
        engine.row("prefill_computed", "Prefill computed"),
        *(row for split in SPLITS for row in _split_rows(engine, *split)),
    )
    if not ledger_configured:  # no ledger: its row is folded away, not a dash
        return PaneView(lines, (("lane", engine.freshness),))
    agent = ledger_source(ledger, ledger_configured)
    ledger_row = agent.row("cache_read_share", "Ledger cache-read share")
    return PaneView((*lines, ledger_row), (("lane", engine.freshness), ("ledger", agent.freshness)))


class CacheGauge(Pane):
    """Hit rate gauge, hits / queries, prompt tokens by source and tier, the ledger's share."""

    BORDER_TITLE = "Prefix cache"
    build = staticmethod(cache_view)
