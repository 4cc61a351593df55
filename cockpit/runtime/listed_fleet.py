"""Lanes listed one by one as the overview's fleet: each read as its panes read it, all at once,
its row made of the same figures; one query for the whole fleet needs a label to find lanes by
(`sources.fleet`), read beside them. A lane's age runs from its figures' read to the view's end.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace

from cockpit.core.figures import lane_figures
from cockpit.core.fleet import (
    AGE,
    FIGURE_COLUMNS,
    NUMERIC_COLUMNS,
    FleetRow,
    FleetView,
    gpu_cells,
    remember,
    slo_targets,
)
from cockpit.core.gpu_figures import gpu_figures
from cockpit.core.model import LaneTotals, frozen_map
from cockpit.runtime.poller import FleetFeed, LaneFeed, failure_reason


class ListedFleet:
    """The listed lanes' rows, read together (and the discovered lanes', `found`, beside them).
    The feeds are the app's own lane feeds, which the app closes: `aclose` closes `found`."""

    def __init__(self, feeds: Sequence[LaneFeed], found: FleetFeed | None = None) -> None:
        self.feeds = list(feeds)
        self.found = found
        self.history: dict[str, tuple[Mapping[str, float | None], ...]] = {}

    async def read(self, window_s: float, end: float | None) -> FleetView:
        """Every lane over the window ending at `end` (None: now); a listed lane whose read
        fails is a down row saying why, a failed discovery read fails the whole read."""
        at = time.time() if end is None else end
        found = [self.found.read(window_s, end)] if self.found else []
        reads = (feed.read(window_s, end) for feed in self.feeds)
        results = await asyncio.gather(*reads, *found, return_exceptions=True)
        view = results.pop() if found else FleetView((), window_s, at, label=None)
        if isinstance(view, BaseException):
            raise view
        assert isinstance(view, FleetView)
        read = list(zip(self.feeds, results, strict=True))
        rows = [remember(self.history, self._row(feed, result, view.end)) for feed, result in read]
        names = {row.lane for row in rows}
        return replace(
            view,
            rows=(*(row for row in view.rows if row.lane not in names), *rows),
            listed=frozen_map({feed.name: _where(result) for feed, result in read}),
        )

    @staticmethod
    def _row(feed: LaneFeed, result: object, end: float) -> FleetRow:
        if isinstance(result, BaseException):
            if not isinstance(result, Exception):  # cancelled: not a lane's failure
                raise result
            empty = frozen_map(dict.fromkeys(NUMERIC_COLUMNS))
            return FleetRow(feed.name, up=False, values=empty, down_reason=failure_reason(result))
        assert isinstance(result, LaneTotals)
        figures = lane_figures(result, feed.host_kv_tokens, feed.slo).figures
        values: dict[str, float | None] = {key: figures[key].value for key in FIGURE_COLUMNS}
        reasons = {key: figures[key].reason for key in FIGURE_COLUMNS if values[key] is None}
        tokens = result.get("generation_tokens"), result.get("prompt_tokens")
        gpu_values, gpu_reasons = gpu_cells(gpu_figures(result.gpu, *tokens))
        return FleetRow(
            feed.name,
            up=True,
            values=frozen_map({**values, **gpu_values, AGE: max(end - result.end, 0.0)}),
            reasons=frozen_map({**reasons, **gpu_reasons}),
            above=frozenset(key for key in FIGURE_COLUMNS if figures[key].above),
            dialect=result.dialect,
            has_gpu=result.gpu is not None,
            targets=slo_targets(feed.slo),
        )

    async def aclose(self) -> None:
        if self.found is not None:
            await self.found.aclose()


def _where(result: object) -> str:
    if isinstance(result, LaneTotals):
        return f"{result.selector or 'every series'} on {result.server}"
    return f"not read: {failure_reason(result)}" if isinstance(result, Exception) else ""
