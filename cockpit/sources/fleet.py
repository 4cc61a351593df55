"""Every lane of one Prometheus-API server (Prometheus, Thanos, Mimir, VictoriaMetrics) in
one `/api/v1/query` per refresh.

The query is `fleet.fleet_plan`'s, asked through the lane's own `PrometheusSource` (its
client, auth, tenant header, error handling); the answer becomes a `FleetView` whose warnings
carry the server's own (`warnings`, a partial answer: `isPartial`), never hidden.
"""

from __future__ import annotations

import time

from cockpit.config import Discover
from cockpit.fleet import Discovery, FleetView, fleet_plan
from cockpit.sources.prometheus import PrometheusSource


class FleetSource:
    """The fleet of one server: lanes are the values of `label` among the engines' series
    (narrowed by the `match` selector), found anew at every read."""

    def __init__(self, source: PrometheusSource, label: str = "job", match: str = "") -> None:
        self.source = source
        self.label = label
        self.match = match
        self.discovery = Discovery()

    @classmethod
    def of(cls, discover: Discover) -> FleetSource:
        """The fleet `discover` describes, on its own client (`feeds.prometheus_source`)."""
        from cockpit.feeds import prometheus_source

        source = prometheus_source(discover.server)
        return cls(source, discover.label, discover.server.selector)

    def __repr__(self) -> str:
        return f"FleetSource({self.source.url!r}, by {self.label!r})"

    @property
    def requests(self) -> int:
        """HTTP requests sent so far."""
        return self.source.requests

    async def read(self, window_s: float, end: float | None = None) -> FleetView:
        """Every lane's row over (end - window, end] (now by default), from one request.

        Raises SourceError (a `SourceFailure`) when the server can't answer."""
        end = time.time() if end is None else end
        plan = fleet_plan(self.label, self.match, window_s)
        answer = await self.source.query(plan.query, end)
        return FleetView(
            rows=tuple(self.discovery.rows(plan, answer.result, end)),
            window_s=window_s,
            end=end,
            warnings=answer.warnings,
            server=self.source.url,
            label=self.label,
            partial=answer.partial,
            query=plan.query,
            query_seconds=answer.client_seconds,
            eval_seconds=answer.eval_seconds,
        )

    async def probe(self) -> bool:
        """Does the server answer again? (the poller's cheap check)"""
        return await self.source.probe()

    async def aclose(self) -> None:
        await self.source.aclose()
