"""A lane's tails: p50 / p90 / p95 / p99 of its latency histograms over the window. Pure.

Each quantile is Prometheus's own `histogram_quantile` over the window's bucket increases
(`cockpit.core.quantiles`), so a direct scrape and a Prometheus read the same number. A quantile
past the engine's largest finite bucket is that bound, flagged as a lower bound (`> 60 s`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from cockpit.core.model import Bucket, Figure, LaneTotals, divide, make_figure
from cockpit.core.quantiles import histogram_quantile


class Latency(NamedTuple):
    """A latency the tails show: its raw `histogram` key (percentile figures are
    `<histogram>_p<percentile>`) beside the figure of its `mean`, what it times (`label`, as
    figures and receipts name it), and the tails pane's `row` (`short` where there is no room)."""

    histogram: str
    mean: str
    label: str
    row: str
    short: str


LATENCIES: tuple[Latency, ...] = (
    Latency("ttft", "ttft_mean", "Time to first token", "TTFT", "TTFT"),
    Latency("itl", "itl_hist_mean", "Inter-token latency", "Inter-token", "ITL"),
    Latency("e2e", "e2e_mean", "End-to-end latency", "End-to-end", "E2E"),
    Latency("queue", "queue_mean", "Queue time", "Queue", "Queue"),
)
"""In the order a user asks. The ITL histogram counts per engine step in vLLM, per token in
SGLang: its own mean (`itl_hist_mean`), not the step (`itl_mean`), sits beside its tails."""
PERCENTILES: tuple[int, ...] = (50, 90, 95, 99)
NO_REQUESTS = "no requests in window"
SCRAPED = "scrape "
"""How a direct scrape's description of a series begins (any other query is PromQL)."""


def tail_keys(histogram: str) -> tuple[str, ...]:
    return tuple(f"{histogram}_p{p}" for p in PERCENTILES)


def tail_figures(totals: LaneTotals) -> list[Figure]:
    """Every tail figure, in LATENCIES then PERCENTILES order, and the ITL histogram's mean."""
    tails = [
        _tail(totals, latency.histogram, latency.label, percentile)
        for latency in LATENCIES
        for percentile in PERCENTILES
    ]
    return [*tails, _itl_hist_mean(totals)]


def _itl_hist_mean(totals: LaneTotals) -> Figure:
    mean = divide(totals.get("itl_sum"), totals.get("itl_count"))
    why = totals.missing.get("itl_sum") or totals.missing.get("itl_count") or NO_REQUESTS
    label = "Inter-token latency (histogram mean)"
    return make_figure("itl_hist_mean", label, mean, "seconds", why, totals.queries.get("itl_sum"))


def _tail(totals: LaneTotals, histogram: str, label: str, percentile: int) -> Figure:
    key, q = f"{histogram}_p{percentile}", percentile / 100
    buckets = totals.histograms.get(histogram)
    source = totals.queries.get(histogram, "")
    query = f"histogram_quantile({q}, {source})" if source else ""
    if source.startswith(SCRAPED):
        query = f"p{percentile} of {source}"
    found = None if buckets is None else histogram_quantile(q, buckets)
    if found is None:
        why = totals.missing.get(histogram, NO_REQUESTS) if buckets is None else _why(buckets)
        return make_figure(key, f"{label} p{percentile}", None, "seconds", why, query)
    value, above = found
    first = min(le for le, _ in buckets or ())
    note = "past the engine's largest bucket" if above else ""
    if value <= first and not above:  # interpolated from 0 across the whole first bucket
        note = f"within the engine's first bucket (≤ {first:g} s)"
    mended = totals.bucket_notes.get(histogram, "")
    note = "; ".join(part for part in (mended, note) if part)
    return make_figure(
        key, f"{label} p{percentile}", value, "seconds", "", query, note, above, bool(mended)
    )


def _why(buckets: tuple[Bucket, ...]) -> str:
    """Why buckets that were read give no quantile."""
    if not buckets or buckets[-1][1] == 0:
        return NO_REQUESTS
    if not math.isinf(buckets[-1][0]):
        return "the histogram has no +Inf bucket"
    return "the histogram has fewer than two buckets"
