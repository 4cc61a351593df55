"""What a polling cycle hands the app: one immutable snapshot per source."""

from __future__ import annotations

from dataclasses import dataclass

from cockpit.figures import LaneFigures, LedgerFigures
from cockpit.model import FRESH, Freshness, LaneTotals, LedgerTotals
from cockpit.roofline import Hardware, ModelProfile


@dataclass(frozen=True, slots=True)
class LaneSnapshot:
    """One lane after a refresh. On failure the last good figures stay, marked stale."""

    lane: str
    window: str
    totals: LaneTotals | None
    figures: LaneFigures | None
    hardware: Hardware | None
    model: ModelProfile | None
    freshness: Freshness = FRESH
    latency_s: float | None = None
    """Wall time of the last query, client and server."""
    updated_at: float | None = None
    """When the figures were last read successfully."""
    replay_at: float | None = None
    """Set when the cockpit replays a past moment (`--at`)."""


@dataclass(frozen=True, slots=True)
class LedgerSnapshot:
    """The agent ledger(s) after a refresh."""

    window: str
    totals: LedgerTotals | None
    figures: LedgerFigures | None
    freshness: Freshness = FRESH
    latency_s: float | None = None
    updated_at: float | None = None
    replay_at: float | None = None
