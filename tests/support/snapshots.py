"""Snapshots the panes draw, made from the scripted totals, and the rows a pane view holds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cockpit.core.figures import lane_figures
from cockpit.core.ledger_figures import ledger_figures
from cockpit.core.model import FRESH, Freshness, frozen_map
from cockpit.core.snapshot import LaneSnapshot, LedgerSnapshot, for_lane
from cockpit.runtime.poller import LedgerPoller
from cockpit.sources.ledger import LedgerSet, LedgerTailer
from cockpit.widgets.pane import Bar, Note, PaneView, Row, Segment
from tests.support.feeds import H100, LLAMA_8B, lane_totals, ledger_totals


def lane_snapshot(freshness: Freshness = FRESH, **changes: float) -> LaneSnapshot:
    """Lane-a's snapshot of the scripted totals (tests/support/feeds.py), `changes` on top."""
    totals = lane_totals()
    if changes:
        totals = replace(totals, values=frozen_map({**totals.values, **changes}))
    return LaneSnapshot(
        "lane-a", "1h", totals, lane_figures(totals), H100, LLAMA_8B, freshness, 0.012
    )


SPLIT = {
    "prompt_by_source": {
        "local_compute": 1_380_000.0, "local_cache_hit": 18_320_000.0,
        "external_kv_transfer": 300_000.0,
    },
    "cached_by_source": {
        "device": 17_420_000.0, "host": 900_000.0, "p2p": 0.0, "disk": 200_000.0,
        "external_unspecified": 100_000.0,
    },
}  # fmt: skip
"""A lane with a host tier, a disk tier and a KV connector: its 20 M prompt tokens by source,
its 18.62 M cached ones (18.32 M local hits + 0.3 M transferred) by tier."""


def split_lane_snapshot() -> LaneSnapshot:
    """The test lane with its prompt tokens split by source and its cached tokens by tier."""
    totals = lane_totals()
    groups = {**totals.groups, **{key: frozen_map(group) for key, group in SPLIT.items()}}
    values = {**totals.values, "prompt_computed": SPLIT["prompt_by_source"]["local_compute"]}
    totals = replace(totals, groups=frozen_map(groups), values=frozen_map(values))
    return LaneSnapshot("lane-a", "1h", totals, lane_figures(totals), H100, LLAMA_8B, FRESH, 0.012)


def ledger_snapshot(freshness: Freshness = FRESH) -> LedgerSnapshot:
    """The scripted ledger's snapshot."""
    totals = ledger_totals()
    return LedgerSnapshot("1h", totals, ledger_figures(totals), freshness, 0.004)


def priced_ledger(*models: str) -> LedgerSnapshot | None:
    """The test ledger with money: claude priced ($1.25 billed, $3.50 estimated), qwen3 local;
    narrowed to `models` as a lane's panes show it."""
    totals = ledger_totals()
    paid = replace(totals.by_model["claude-sonnet-4"], cost_actual=1_250_000_000,
                   cost_estimated=3_500_000_000)  # fmt: skip
    local = totals.by_model["qwen3-32b"]
    totals = replace(
        totals,
        total=paid + local,
        by_model=frozen_map({"anthropic/claude-sonnet-4": paid, "custom/qwen3-32b": local}),
    )
    snapshot = LedgerSnapshot("1h", totals, ledger_figures(totals), FRESH, 0.004)
    return for_lane(snapshot, models)


def rows(view: PaneView) -> dict[str, Row]:
    """A pane view's figure rows by label."""
    return {line.label: line for line in view.lines if isinstance(line, Row)}


async def ledger_snapshot_of(path: Path) -> LedgerSnapshot:
    """One read of the ledger file at `path`, as the cockpit's poller reads it (24 h)."""
    ledger = LedgerSet([LedgerTailer(path)])
    try:
        return await LedgerPoller(ledger, 1.0).cycle("24h")
    finally:
        await ledger.close()


def figures_view(values: list[str], stale: bool = False) -> PaneView:
    """A pane view of one row per value (stale ones when `stale`), a bar and a note."""
    fresh = Freshness("stale", since=0.0, reason="down") if stale else FRESH
    rows = tuple(Row(f"figure {i}", value, stale=stale) for i, value in enumerate(values))
    bar = Bar((Segment(0.25, "good"), Segment(0.5, "warn")), caption=values[0])
    return PaneView((*rows, bar, Note("note")), sources=(("lane", fresh),))
