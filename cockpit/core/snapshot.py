"""What a polling cycle hands the app: one immutable snapshot per source."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace

from cockpit.core.figures import LaneFigures, lane_load
from cockpit.core.gpu_figures import GpuFigures, gpu_figures
from cockpit.core.ledger_figures import LedgerFigures, Prices, ledger_figures, narrow
from cockpit.core.model import FRESH, Freshness, LaneTotals, LedgerTotals
from cockpit.roofline.model import (
    Hardware,
    ModelProfile,
    RooflineView,
    gpu_point,
    operating_points,
)


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
    gpus: int = 1
    """GPUs behind the lane; `hardware` is already all of them together."""
    chunk_tokens: int | None = None
    waiting_streak: int = 0
    """Good refreshes in a row, up to this one, that found requests waiting (`waiting_now`)."""

    def roofline(self) -> RooflineView | None:
        """The lane's roofline, with its operating points once figures exist."""
        if self.hardware is None or self.model is None:
            return None
        points = None
        if self.figures is not None:
            load = lane_load(self.figures, self.gpus)
            points = operating_points(load, self.hardware, self.model, self.chunk_tokens)
            if (gpu := self.gpu_figures()) is not None:
                dram, tensor = gpu.value("dram_active"), gpu.value("tensor_active")
                g, why = gpu_point(self.hardware, self.model, dram, tensor)
                points = replace(points, gpu=g, gpu_reason=why)
        return RooflineView(self.hardware, self.model, points)

    def gpu_figures(self) -> GpuFigures | None:
        """The lane's GPU figures (None without a GPU source), energy per token over the
        lane's own token counts of the window."""
        totals = self.totals
        if totals is None:
            return None
        tokens = totals.get("generation_tokens"), totals.get("prompt_tokens")
        return gpu_figures(totals.gpu, *tokens)


@dataclass(frozen=True, slots=True)
class LedgerSnapshot:
    """The agent ledger(s) after a refresh."""

    window: str
    totals: LedgerTotals | None
    figures: LedgerFigures | None
    freshness: Freshness = FRESH
    latency_s: float | None = None


def for_lane(
    snapshot: LedgerSnapshot | None, models: Collection[str], prices: Prices | None = None
) -> LedgerSnapshot | None:
    """The ledger snapshot as a lane's panes show it: narrowed to `models` when there are any."""
    if snapshot is None or snapshot.totals is None or not models:
        return snapshot
    totals = narrow(snapshot.totals, models)
    return replace(snapshot, totals=totals, figures=ledger_figures(totals, prices))
