"""A quantile from a histogram's cumulative buckets, as Prometheus's `histogram_quantile` does.

Pure: the same steps as `bucketQuantile` in Prometheus 2.42 (promql/quantile.go), so the
direct-scrape path and the server agree to the last bit: buckets sorted by bound, equal bounds
added together, counts made monotonic, the rank `q × total` found by the first bucket whose
count reaches it, and linear interpolation inside that bucket (the first bucket starts at 0,
unless its bound is ≤ 0: then that bound is the answer).

A rank in the `+Inf` bucket has no upper edge to interpolate to: Prometheus answers the largest
finite bound, which is only a lower bound of the true quantile, so it comes back flagged.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate

from cockpit.core.model import Bucket


def histogram_quantile(q: float, buckets: Sequence[Bucket]) -> tuple[float, bool] | None:
    """The `q`-quantile of cumulative `(le, count)` buckets and whether it is only a lower bound
    (past the largest finite bucket). None where Prometheus answers NaN: no observations, fewer
    than two distinct bounds, no `+Inf` bucket, `q` NaN; ValueError for `q` outside [0, 1]."""
    if math.isnan(q) or not buckets:
        return None
    if not 0 <= q <= 1:
        raise ValueError(f"quantile {q} is outside [0, 1]")
    ordered = sorted(buckets, key=lambda bucket: bucket[0])
    if ordered[-1][0] != math.inf:
        return None
    bounds, counts = _envelope(ordered)
    if len(bounds) < 2 or counts[-1] == 0:
        return None
    rank = q * counts[-1]
    b = bisect_left(counts, rank, hi=len(counts) - 1)  # the first count ≥ rank, as sort.Search
    if b == len(bounds) - 1:
        return bounds[-2], True
    if b == 0 and bounds[0] <= 0:
        return bounds[0], False
    start, count = 0.0, counts[b]
    if b > 0:
        start = bounds[b - 1]
        count -= counts[b - 1]
        rank -= counts[b - 1]
    return start + (bounds[b] - start) * (rank / count), False


def _envelope(ordered: Sequence[Bucket]) -> tuple[list[float], list[float]]:
    """Bounds and counts: equal bounds (series that overlap once summed) added up, then each
    count raised to the largest before it (the envelope Prometheus takes when the increases of
    separately scraped buckets disagree)."""
    merged: list[list[float]] = []
    for bound, count in ordered:
        if merged and merged[-1][0] == bound:
            merged[-1][1] += count
        else:
            merged.append([bound, count])
    counts = accumulate((count for _, count in merged), lambda top, count: max(count, top))
    return [bound for bound, _ in merged], list(counts)
