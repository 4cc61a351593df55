"""Every lane of one Prometheus-API server in one `/api/v1/query` per refresh (`fleet_plan`'s),
asked through a lane's own `PrometheusSource` (client, auth, tenant, errors, warnings)."""

from __future__ import annotations

import time

from cockpit.core.fleet import Discovery, FleetView, fleet_plan, slo_histograms
from cockpit.core.slo import NO_SLO, Slo
from cockpit.sources.prometheus import PrometheusSource


class FleetSource:
    """The fleet of one server: lanes are the values of `label` among the engines' series
    (narrowed by the `match` selector), found anew at every read."""

    def __init__(
        self, source: PrometheusSource, label: str = "job", match: str = "", slo: Slo = NO_SLO
    ) -> None:
        self.source = source
        self.label = label
        self.match = match
        self.slo = slo
        """The lanes' latency targets: their buckets are asked, for the attainment columns."""
        self.discovery = Discovery()

    async def read(self, window_s: float, end: float | None = None) -> FleetView:
        """Every lane's row over (end - window, end] (now by default) from one request."""
        end = time.time() if end is None else end
        plan = fleet_plan(self.label, self.match, window_s, slo_histograms(self.slo))
        answer = await self.source.query(plan.query, end)
        return FleetView(
            rows=tuple(self.discovery.rows(plan, answer.result, end, self.slo)),
            window_s=window_s,
            end=end,
            warnings=answer.warnings,
            server=self.source.url,
            label=self.label,
            partial=answer.partial,
            query=plan.query,
            eval_seconds=answer.eval_seconds,
        )

    async def probe(self) -> bool:
        """Does the server answer again? (the poller's cheap check)"""
        return await self.source.probe()

    async def aclose(self) -> None:
        await self.source.aclose()
