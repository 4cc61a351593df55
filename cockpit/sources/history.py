"""A lane's trend from Prometheus's own history (see `cockpit.core.trends`).

One `/api/v1/query_range` asks every trend input at the trend's step: over the whole window at
a lane's first read (a cockpit opened mid-run shows the window's past at once), then only the
steps that became due since, the newest kept one asked again (its last samples may have been
ingested after it was read). No request when no step is due, none beyond the refresh's second
(the list of metric names looked up again: the new steps wait a refresh). What is kept is let
go when the lane's query changes (window, selector, model filter, metric names) and on
`forget()`. A failed history read never fails the lane's figures: the trend is then the last
one read, or none, and `missing["trend"]` says why.

The lane's scrape interval (for steps shorter than a few of them, `trends.rate_range`) comes
with the window's own answer (`LaneTotals.scrape_interval_s`) and is kept per lane: no request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from cockpit.core import promql, trends
from cockpit.core.model import LaneTotals, SourceFailure, Trend, frozen_map

QueryRange = Callable[[str, float, float, float], Awaitable[list[dict[str, Any]]]]
"""One range query (expression, start, end, step) -> its series (`metric`, `values`)."""
TREND = "trend"
"""The `LaneTotals.missing` key saying why the trend is stale or absent."""
StepRiders = Callable[[float, float], Mapping[str, str]]
"""(step, scrape interval) -> expressions by key to ride in the trend's range query (its GPUs')."""
REQUESTS_PER_REFRESH = 2
"""A lane's refresh asks at most this many requests when only new steps are due."""
DEFAULT_SCRAPE_S = 60.0
"""The scrape interval taken while the lane's samples are too few to tell: Prometheus's
default."""


@dataclass(slots=True)
class _Kept:
    """One lane's trend inputs as read so far: step time -> raw key -> value."""

    query: str
    window_s: float
    steps: dict[float, trends.StepValues]
    trend: Trend


class History:
    """The trends of the lanes on one Prometheus server."""

    def __init__(self, query_range: QueryRange) -> None:
        self._query_range = query_range
        self._kept: dict[str, _Kept] = {}
        self._scrape_s: dict[tuple[str, str], float] = {}

    def forget(self) -> None:
        """Let go of every lane's trend: the next read asks its whole window again."""
        self._kept.clear()

    async def attach(
        self,
        totals: LaneTotals,
        names: frozenset[str],
        end: float,
        spent: int,
        riders: StepRiders | None = None,
    ) -> LaneTotals:
        """`totals` with the lane's trend at `end`; `spent`: requests this refresh made."""
        lane, window_s = totals.lane, totals.window_s
        times = trends.point_times(window_s, end)
        step = trends.trend_step(window_s)
        scrape_s = self._scrape_interval(totals)
        query = trends.trend_query(totals.dialect, totals.selector, step, names, scrape_s)
        if riders is not None and (extra := riders(step, scrape_s)):
            query = " or ".join(q for q in (query, promql.combined_query(extra)) if q)
        kept = self._kept.get(lane)
        if (
            kept
            and (kept.query, kept.window_s) == (query, window_s)
            and kept.trend.end <= times[-1]
        ):
            if kept.trend.end == times[-1] or spent >= REQUESTS_PER_REFRESH:
                return replace(totals, trend=kept.trend)
            start = max(kept.trend.end, times[0])
            steps = {t: v for t, v in kept.steps.items() if t >= times[0]}
        else:
            self._kept.pop(lane, None)
            kept, start, steps = None, times[0], {}
        try:
            if not query:
                raise SourceFailure("the lane exposes none of the metrics the trend follows")
            answered = trends.matrix_values(await self._query_range(query, start, times[-1], step))
        except SourceFailure as error:  # the trend stays the last one read, if any
            missing = frozen_map({**totals.missing, TREND: f"trend not read: {error.reason}"})
            return replace(totals, trend=kept.trend if kept else None, missing=missing)
        steps.update({t: answered.get(t, {}) for t in times if t >= start})
        trend = trends.make_trend(
            totals.dialect, window_s, end, steps, trends.rate_range(step, scrape_s)
        )
        self._kept[lane] = _Kept(query, window_s, steps, trend)
        return replace(totals, trend=trend)

    def _scrape_interval(self, totals: LaneTotals) -> float:
        """The lane's scrape interval: as the window's answer found it, else as last found."""
        lane = (totals.lane, totals.selector)
        if totals.scrape_interval_s is not None:
            self._scrape_s[lane] = totals.scrape_interval_s
        return self._scrape_s.get(lane, DEFAULT_SCRAPE_S)
