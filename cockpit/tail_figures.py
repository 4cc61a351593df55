"""A lane's tails: p50 / p90 / p95 / p99 of its latency histograms over the window. Pure.

Each quantile is Prometheus's own `histogram_quantile` over the window's bucket increases
(`cockpit.quantiles`), so a direct scrape and a Prometheus read the same number. A quantile past
the engine's largest finite bucket is that bound, flagged as a lower bound (`> 60 s`).
"""

from __future__ import annotations

import math

from cockpit.model import Bucket, Figure, LaneTotals, make_figure
from cockpit.quantiles import histogram_quantile

PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)
TAILS: dict[str, str] = {
    "ttft": "Time to first token",
    "itl": "Inter-token step",
    "e2e": "End-to-end latency",
    "queue": "Queue time",
}
"""Raw histogram key -> what it times; the figures are `<key>_p<percentile>`."""
NO_REQUESTS = "no requests in window"


def tail_keys(histogram: str) -> tuple[str, ...]:
    return tuple(f"{histogram}_p{p}" for p in PERCENTILES)


def tail_figures(totals: LaneTotals) -> list[Figure]:
    """Every tail figure, in TAILS then PERCENTILES order."""
    return [
        _tail(totals, histogram, label, percentile)
        for histogram, label in TAILS.items()
        for percentile in PERCENTILES
    ]


def _tail(totals: LaneTotals, histogram: str, label: str, percentile: int) -> Figure:
    key, q = f"{histogram}_p{percentile}", percentile / 100
    buckets = totals.histograms.get(histogram)
    source = totals.queries.get(histogram)
    query = f"histogram_quantile({q}, {source})" if source else ""
    found = None if buckets is None else histogram_quantile(q, buckets)
    if found is None:
        why = totals.missing.get(histogram, NO_REQUESTS) if buckets is None else _why(buckets)
        return make_figure(key, f"{label} p{percentile}", None, "seconds", why, query)
    value, above = found
    first = min(le for le, _ in buckets or ())
    note = "past the engine's largest bucket" if above else ""
    if value <= first and not above:  # interpolated from 0 across the whole first bucket
        note = f"within the engine's first bucket (≤ {first:g} s)"
    return make_figure(key, f"{label} p{percentile}", value, "seconds", "", query, note, above)


def _why(buckets: tuple[Bucket, ...]) -> str:
    """Why buckets that were read give no quantile."""
    if not buckets or buckets[-1][1] == 0:
        return NO_REQUESTS
    if not math.isinf(buckets[-1][0]):
        return "the histogram has no +Inf bucket"
    return "the histogram has fewer than two buckets"
